// C++'s new and delete (plain, array, sized, aligned, nothrow) reach specalloc through
// libstdc++'s forwarding to malloc, aligned_alloc and free: run with libspecalloc.so preloaded
// (tests/contract.rs), it checks that each form is counted by specalloc's statistics.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "specalloc.h"

#pragma weak specalloc_stats

#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            std::fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c);                \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

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

int main() {
    CHECK(specalloc_stats != nullptr);
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
    return 0;
}
