// C++'s new and delete (plain, array, sized, aligned, nothrow) are specalloc's own: run with
// libspecalloc.so preloaded (tests/contract.rs), it checks that every form resolves to the
// library, that each is counted by specalloc's statistics, and that a `new` that gets no memory
// behaves as the C++ runtime's (the new-handler, std::bad_alloc, null for the nothrow forms).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "check.h"
#include "specalloc.h"

#pragma weak specalloc_stats

static struct specalloc_stats stats() {
    struct specalloc_stats s;
    CHECK(specalloc_stats(&s, sizeof s) == sizeof s);
    return s;
}

struct alignas(64) Line {
    char bytes[64];
};
struct alignas(4096) Page {
    char bytes[100];
};

// Runs `f`, which allocates `n` objects and frees them; checks that specalloc counted at least
// `n` allocations and that nothing stayed live.
template <typename F> static void counted(const char *what, unsigned n, F f) {
    struct specalloc_stats before = stats();
    f();
    struct specalloc_stats after = stats();
    CHECK(after.allocs >= before.allocs + n);
    CHECK(after.live_objects == before.live_objects);
    std::printf("ok %s\n", what);
}

// Every replaceable allocation function, by its Itanium ABI name.
static const char *const OPERATORS[] = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static int handler_calls;

// A new-handler that gives up on its second call: the first call is a retry, the second
// removes the handler, so that the next failure throws (or returns null).
static void handler() {
    if (++handler_calls >= 2) std::set_new_handler(nullptr);
}

// More than any allocator can give: operator new sees it, where `new char[n]` would be refused
// by the compiler's own size check first.
static const std::size_t HUGE = SIZE_MAX / 2;

int main() {
    CHECK(specalloc_stats != nullptr);
    for (const char *name : OPERATORS) {
        void *f = dlsym(RTLD_DEFAULT, name);
        Dl_info info;
        CHECK(f != nullptr && dladdr(f, &info) != 0 && info.dli_fname != nullptr);
        if (std::strstr(info.dli_fname, "libspecalloc") == nullptr) {
            std::fprintf(stderr, "%s resolves to %s\n", name, info.dli_fname);
            std::exit(1);
        }
    }
    std::printf("ok operators are specalloc's\n");
    counted("new delete", 1, [] {
        int *p = new int(42);
        CHECK(*p == 42);
        delete p; // sized delete (C++14) with -fsized-deallocation, the default
    });
    counted("new[] delete[]", 1, [] {
        std::string *a = new std::string[3];
        a[2] = std::string(100, 'x');
        CHECK(a[2].size() == 100);
        delete[] a;
    });
    counted("sized delete", 1, [] {
        void *p = ::operator new(100);
        ::operator delete(p, 100);
    });
    counted("aligned new delete", 2, [] {
        Line *l = new Line;
        CHECK(reinterpret_cast<std::uintptr_t>(l) % 64 == 0);
        Page *p = new Page;
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
        std::memset(p->bytes, 1, sizeof p->bytes);
        delete l;
        delete p;
    });
    counted("aligned sized new[] delete[]", 2, [] {
        Line *ls = new Line[10];
        CHECK(reinterpret_cast<std::uintptr_t>(ls) % 64 == 0);
        delete[] ls;
        void *q = ::operator new(1000, std::align_val_t(256));
        CHECK(reinterpret_cast<std::uintptr_t>(q) % 256 == 0);
        ::operator delete(q, 1000, std::align_val_t(256));
    });
    counted("nothrow new", 2, [] {
        int *p = new (std::nothrow) int[1000];
        CHECK(p != nullptr);
        delete[] p;
        Line *l = new (std::nothrow) Line;
        CHECK(l != nullptr && reinterpret_cast<std::uintptr_t>(l) % 64 == 0);
        delete l;
    });
    counted("containers", 1000, [] {
        std::map<int, std::string> m;
        for (int i = 0; i < 1000; i++) m[i] = std::to_string(i * 7919) + std::string(i % 50, 'y');
        std::vector<std::unique_ptr<Line>> v;
        for (int i = 0; i < 500; i++) v.push_back(std::make_unique<Line>());
        CHECK(m[999].size() >= 4 && v.size() == 500);
    });
    bool threw = false;
    try {
        std::size_t huge = SIZE_MAX / 2;
        char *p = new char[huge];
        p[0] = 1;
        delete[] p;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    CHECK(threw);
    std::printf("ok bad_alloc\n");

    // Each failing form: the handler is called between tries, then the runtime's answer.
    struct {
        const char *what;
        bool nothrow;
        void *(*call)();
    } failing[] = {
        {"new", false, [] { return ::operator new(HUGE); }},
        {"new[]", false, [] { return ::operator new[](HUGE); }},
        {"nothrow new", true, [] { return ::operator new(HUGE, std::nothrow); }},
        {"nothrow new[]", true, [] { return ::operator new[](HUGE, std::nothrow); }},
        {"aligned new", false, [] { return ::operator new(HUGE, std::align_val_t(64)); }},
        {"aligned new[]", false, [] { return ::operator new[](HUGE, std::align_val_t(64)); }},
        {"aligned nothrow new", true,
         [] { return ::operator new(HUGE, std::align_val_t(64), std::nothrow); }},
        {"aligned nothrow new[]", true,
         [] { return ::operator new[](HUGE, std::align_val_t(64), std::nothrow); }},
    };
    for (auto &f : failing) {
        handler_calls = 0;
        std::set_new_handler(handler);
        bool threw_now = false;
        void *p = nullptr;
        try {
            p = f.call();
        } catch (const std::bad_alloc &) {
            threw_now = true;
        }
        CHECK(p == nullptr);
        CHECK(threw_now == !f.nothrow);
        if (handler_calls != 2) {
            std::fprintf(stderr, "%s: the new-handler ran %d times\n", f.what, handler_calls);
            std::exit(1);
        }
        CHECK(std::get_new_handler() == nullptr);
    }
    std::printf("ok new-handler and failures\n");

    // A handler that frees what the program held lets the retry succeed.
    {
        handler_calls = 0;
        std::set_new_handler([] { handler_calls++; });
        std::size_t big = std::size_t(1) << 20;
        void *p = ::operator new(big);
        std::memset(p, 7, big);
        std::set_new_handler(nullptr);
        ::operator delete(p, big);
        CHECK(handler_calls == 0);
    }
    // An alignment that is not a power of two is refused, as libstdc++ refuses it.
    bool refused = false;
    try {
        void *p = ::operator new(64, std::align_val_t(48));
        ::operator delete(p, std::align_val_t(48));
    } catch (const std::bad_alloc &) {
        refused = true;
    }
    CHECK(refused);
    std::printf("ok bad alignment\n");
    return 0;
}
