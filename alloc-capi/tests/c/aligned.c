/* Aligned allocations under the preload (tests/aligned.rs). Each mode prints "ok MODE ..." and
 * exits 0, or prints what failed and exits 1. Run on glibc too, where the figures printed are
 * the control the test compares against.
 *
 *   many   70,000 blocks of 64 bytes at 16 KiB alignment kept live: the VmSize they add, then
 *          100,000 malloc(1000) and a pthread_create, which must all succeed; after freeing,
 *          the VmSize left.
 *   sweep  every alignment 16 B .. 4 MiB times every size 1 B .. 1 MiB: 16 blocks of each kept
 *          live at once (aligned, writable, freeable by free); the largest VmSize seen.
 *   maps   the process's mappings filled up to vm.max_map_count with the program's own
 *          one-page mappings: aligned and large requests then fail cleanly (NULL, ENOMEM) or
 *          succeed; the VmSize they added and the bytes they were given are printed (the test
 *          bounds one by the other); once some mappings are given back, every request
 *          succeeds again. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

/* VmSize of this process, in KiB. */
static long vm_size_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
    fclose(f);
    CHECK(kib > 0);
    return kib;
}

static void *nothing(void *arg) { return arg; }

static int many(void) {
    enum { N = 70000, M = 100000 };
    long before = vm_size_kib();
    void **ps = malloc(N * sizeof *ps);
    CHECK(ps);
    for (int i = 0; i < N; i++) {
        CHECK(posix_memalign(&ps[i], 16384, 64) == 0);
        CHECK((uintptr_t)ps[i] % 16384 == 0);
        memset(ps[i], (int)i, 64);
    }
    long live = vm_size_kib() - before;
    int failed = 0;
    for (int i = 0; i < M; i++) {
        void *p = malloc(1000);
        if (!p) failed++;
        free(p);
    }
    pthread_t t;
    int created = pthread_create(&t, NULL, nothing, NULL);
    if (created == 0) pthread_join(t, NULL);
    for (int i = 0; i < N; i++) {
        CHECK(((unsigned char *)ps[i])[63] == (unsigned char)i);
        free(ps[i]);
    }
    free(ps);
    long after = vm_size_kib() - before;
    printf("ok many vmsize_kib=%ld after_kib=%ld failed_mallocs=%d pthread_create=%d\n", live,
           after, failed, created);
    return failed == 0 && created == 0 ? 0 : 1;
}

static int sweep(void) {
    enum { K = 16 };
    long before = vm_size_kib(), peak = 0;
    for (size_t align = 16; align <= (4u << 20); align <<= 1) {
        for (size_t size = 1; size <= (1u << 20); size = size * 4 + 3) {
            void *ps[K];
            for (int i = 0; i < K; i++) {
                CHECK(posix_memalign(&ps[i], align, size) == 0);
                CHECK((uintptr_t)ps[i] % align == 0);
                CHECK(malloc_usable_size(ps[i]) >= size);
                memset(ps[i], 0x33, size);
            }
            long vm = vm_size_kib() - before;
            if (vm > peak) peak = vm;
            for (int i = 0; i < K; i++) {
                if (i % 2) free(ps[i]);
                else {
                    /* aligned_alloc and memalign's blocks, freed the same way. */
                    free(ps[i]);
                    void *q = i % 4 ? memalign(align, size) : aligned_alloc(align, size);
                    CHECK(q && (uintptr_t)q % align == 0);
                    free(q);
                }
            }
        }
    }
    printf("ok sweep peak_vmsize_kib=%ld\n", peak);
    return 0;
}

static int maps(void) {
    /* Warm the allocator up first: a heap and a chunk for the small requests below. */
    void *warm = malloc(100);
    CHECK(warm);
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    CHECK(f);
    long max = 0;
    CHECK(fscanf(f, "%ld", &max) == 1);
    fclose(f);
    CHECK(max > 1000 && max < 10000000);
    long page = sysconf(_SC_PAGESIZE);
    /* One-page mappings, every other one read-only so that the kernel cannot merge them. */
    char **mine = mmap(NULL, (size_t)max * sizeof *mine, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mine != MAP_FAILED);
    long n = 0;
    for (; n < max; n++) {
        void *p = mmap(NULL, (size_t)page, (n % 2) ? PROT_READ : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            CHECK(errno == ENOMEM);
            break;
        }
        mine[n] = p;
    }
    CHECK(n < max);
    long vm0 = vm_size_kib();
    /* At the limit, then one and then two below it: a request that needs a mapping gets one or
     * fails with ENOMEM; what it cannot finish (the alignment slop it cannot unmap) is given
     * back, so the VmSize does not grow past the blocks that were handed out. */
    int got = 0, refused = 0;
    long handed_kib = 0;
    void *held[64];
    int nheld = 0;
    for (int round = 0; round < 3; round++) {
        if (round > 0) {
            CHECK(munmap(mine[--n], (size_t)page) == 0);
            vm0 -= page / 1024;
        }
        for (int i = 0; i < 8; i++) {
            void *p = NULL;
            size_t size = (size_t)(3 + i % 3) << 20;
            int r = posix_memalign(&p, (size_t)2 << 20, size);
            if (r == 0) {
                CHECK(p && (uintptr_t)p % (2u << 20) == 0);
                memset(p, 1, 4096);
                got++;
                handed_kib += (long)(size >> 10) + 4;
                if (nheld < 64) held[nheld++] = p;
            } else {
                CHECK(r == ENOMEM && p == NULL);
                refused++;
            }
            errno = 0;
            void *q = malloc(size);
            if (q) {
                got++;
                handed_kib += (long)(size >> 10) + 4;
                if (nheld < 64) held[nheld++] = q;
            } else {
                CHECK(errno == ENOMEM);
                refused++;
            }
        }
    }
    /* Each block handed out maps its own size (and an allocator may map a chunk or two more);
     * the test bounds the growth with these figures. */
    long grown = vm_size_kib() - vm0;
    for (int i = 0; i < nheld; i++) free(held[i]);
    /* Give 2,000 mappings back: everything works again. */
    for (int i = 0; i < 2000 && n > 0; i++) CHECK(munmap(mine[--n], (size_t)page) == 0);
    for (int i = 0; i < 100; i++) {
        void *p = NULL;
        CHECK(posix_memalign(&p, 16384, 64) == 0 && p);
        void *q = malloc(1000);
        void *r = malloc((size_t)3 << 20);
        CHECK(q && r);
        free(p);
        free(q);
        free(r);
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, nothing, NULL) == 0);
    pthread_join(t, NULL);
    while (n > 0) munmap(mine[--n], (size_t)page);
    free(warm);
    printf("ok maps got=%d refused=%d grown_kib=%ld handed_kib=%ld\n", got, refused, grown,
           handed_kib);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "many") == 0) return many();
    if (strcmp(mode, "sweep") == 0) return sweep();
    if (strcmp(mode, "maps") == 0) return maps();
    fprintf(stderr, "usage: aligned many|sweep|maps\n");
    return 2;
}
