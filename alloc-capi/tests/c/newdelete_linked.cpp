// C++'s new and delete with libspecalloc.a linked into the program (tests/contract.rs), with
// libstdc++ shared or linked statically (-static-libstdc++): the program's operator new is
// specalloc's, new and delete work, and a new that gets no memory throws std::bad_alloc where
// libstdc++'s operator new is there to hand it to (shared). Where libstdc++ is linked into the
// program, specalloc's operators are the only ones: run with the argument `fail`, the program
// asks for more than any allocator can give, and specalloc stops it with a message.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "check.h"
#include "specalloc.h"

int main(int argc, char **argv) {
    // The program's own operator new: specalloc's, linked in.
    void *(*op)(std::size_t) = &::operator new;
    Dl_info info;
    CHECK(dladdr(reinterpret_cast<void *>(op), &info) != 0 && info.dli_fname != nullptr);
    CHECK(std::strstr(info.dli_fname, "libstdc++") == nullptr);
    struct specalloc_stats before, after;
    CHECK(specalloc_stats(&before, sizeof before) == sizeof before);
    std::vector<int *> v;
    for (int i = 0; i < 1000; i++) v.push_back(new int(i));
    long sum = 0;
    for (int *p : v) {
        sum += *p;
        delete p;
    }
    CHECK(sum == 499500);
    CHECK(specalloc_stats(&after, sizeof after) == sizeof after);
    CHECK(after.allocs >= before.allocs + 1000);
    std::printf("ok new delete\n");
    if (argc > 1 && std::strcmp(argv[1], "fail") == 0) {
        std::fflush(stdout);
        void *p = ::operator new(SIZE_MAX / 2);
        std::printf("new of SIZE_MAX / 2 returned %p\n", p);
        return 1;
    }
    bool threw = false;
    try {
        void *p = ::operator new(SIZE_MAX / 2);
        std::printf("new of SIZE_MAX / 2 returned %p\n", p);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    CHECK(threw);
    std::printf("ok bad_alloc\n");
    return 0;
}
