/* Every exported function's contract, run with libspecalloc.so preloaded (tests/contract.rs).
 * Prints one "ok <name>" line per check group and exits 0; any failure prints the line and
 * the values and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "specalloc.h"

/* Weak: resolved by the preloaded library (main checks that they were). */
#pragma weak specalloc_stats
#pragma weak specalloc_stats_print
#pragma weak specalloc_collect

/* glibc's internal names, exported by glibc and by specalloc; not in any header. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
/* The old cfree, and C23's sized frees (glibc 2.39): declared here, since older headers lack
 * them; weak, so that the program links against any glibc (main checks they resolved). */
extern void cfree(void *) __attribute__((weak));
extern void free_sized(void *, size_t) __attribute__((weak));
extern void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));

#include "check.h"

static struct specalloc_stats stats(void) {
    struct specalloc_stats s;
    CHECK(specalloc_stats(&s, sizeof s) == sizeof s);
    return s;
}

/* Fills all `n` usable bytes of `p` with a pattern seeded by `seed`; checks it. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + seed);
}
static int intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed)) return 0;
    return 1;
}

static size_t want_align(size_t n) { return n >= 16 ? 16 : 8; }

static const size_t SIZES[] = {0,     1,     7,     8,      9,      15,      16,      17,
                               24,    25,    31,    32,     33,     100,     1000,    1024,
                               4095,  4096,  8191,  8192,   20000,  32768,   32769,   40000,
                               65536, 70000, 1 << 20, (1 << 20) + 1, 3 << 20, 5 << 20, 9 << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static void check_malloc(void) {
    /* Every size: aligned, usable >= request, all of it writable without touching a neighbour. */
    void *ps[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = SIZES[i];
        unsigned char *p = malloc(n);
        CHECK(p != NULL);
        CHECK((uintptr_t)p % want_align(n == 0 ? 1 : n) == 0);
        size_t u = malloc_usable_size(p);
        CHECK(u >= n);
        CHECK(u >= 1);
        fill(p, u, (unsigned)i);
        ps[i] = p;
    }
    for (size_t i = 0; i < NSIZES; i++) {
        CHECK(intact(ps[i], malloc_usable_size(ps[i]), (unsigned)i));
        free(ps[i]);
    }
    /* Small sizes one by one, many of each, interleaved. */
    for (size_t n = 1; n <= 600; n++) {
        unsigned char *a = malloc(n), *b = malloc(n);
        CHECK(a && b && a != b);
        CHECK((uintptr_t)a % want_align(n) == 0 && (uintptr_t)b % want_align(n) == 0);
        fill(a, malloc_usable_size(a), 1);
        fill(b, malloc_usable_size(b), 2);
        CHECK(intact(a, malloc_usable_size(a), 1) && intact(b, malloc_usable_size(b), 2));
        free(a);
        free(b);
    }
    /* malloc(0): a unique, freeable pointer each time. */
    void *z[64];
    for (int i = 0; i < 64; i++) {
        z[i] = malloc(0);
        CHECK(z[i] != NULL);
        for (int j = 0; j < i; j++) CHECK(z[i] != z[j]);
    }
    for (int i = 0; i < 64; i++) free(z[i]);
    /* Impossible sizes: NULL and ENOMEM. */
    errno = 0;
    CHECK(malloc(SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(malloc(PTRDIFF_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(malloc((size_t)1 << 62) == NULL && errno == ENOMEM);
    free(NULL);
    CHECK(malloc_usable_size(NULL) == 0);
    puts("ok malloc free malloc_usable_size");
}

static void check_calloc(void) {
    /* Reused blocks come back zeroed. */
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = SIZES[i];
        unsigned char *p = malloc(n);
        CHECK(p);
        memset(p, 0xAB, malloc_usable_size(p));
        free(p);
        unsigned char *q = calloc(1, n);
        CHECK(q);
        for (size_t k = 0; k < n; k++) CHECK(q[k] == 0);
        free(q);
        q = calloc(n, 3);
        CHECK(q);
        for (size_t k = 0; k < n * 3; k++) CHECK(q[k] == 0);
        free(q);
    }
    void *p = calloc(0, 10), *q = calloc(10, 0);
    CHECK(p && q && p != q);
    free(p);
    free(q);
    errno = 0;
    CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(calloc((size_t)1 << 33, (size_t)1 << 33) == NULL && errno == ENOMEM);
    puts("ok calloc");
}

static void check_realloc(void) {
    /* Grow and shrink through every kind of block; the contents follow. */
    static const size_t steps[] = {1, 10, 16, 24, 100, 1000, 5000, 32768, 40000, 200000,
                                   1 << 20, 2 << 20, 3 << 20, 12 << 20, 4 << 20, 100000,
                                   500, 20, 8, 1};
    unsigned char *p = realloc(NULL, steps[0]);
    CHECK(p);
    size_t have = steps[0];
    fill(p, have, 9);
    for (size_t i = 1; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        unsigned char *q = realloc(p, n);
        CHECK(q);
        CHECK((uintptr_t)q % want_align(n) == 0);
        CHECK(malloc_usable_size(q) >= n);
        size_t keep = have < n ? have : n;
        CHECK(intact(q, keep, 9));
        fill(q, n, 9);
        p = q;
        have = n;
    }
    /* Growing in small steps inside a size class stays in place. */
    unsigned char *a = malloc(33);
    CHECK(a);
    CHECK(realloc(a, 40) == a && realloc(a, 48) == a);
    free(a);
    /* A refused resize: NULL, ENOMEM, the block untouched and still ours. */
    errno = 0;
    CHECK(realloc(p, SIZE_MAX - 4096) == NULL && errno == ENOMEM);
    CHECK(intact(p, have, 9));
    /* realloc(p, 0) frees p and returns NULL (glibc). */
    struct specalloc_stats before = stats();
    CHECK(realloc(p, 0) == NULL);
    struct specalloc_stats after = stats();
    CHECK(after.live_objects + 1 == before.live_objects);
    /* realloc(NULL, 0) is malloc(0): a unique pointer. */
    void *z = realloc(NULL, 0);
    CHECK(z != NULL);
    free(z);
    puts("ok realloc");

    /* reallocarray: overflow fails with ENOMEM and leaves the block as it was. */
    unsigned char *r = reallocarray(NULL, 10, 10);
    CHECK(r && malloc_usable_size(r) >= 100);
    fill(r, 100, 3);
    errno = 0;
    CHECK(reallocarray(r, SIZE_MAX / 2, 4) == NULL && errno == ENOMEM);
    CHECK(intact(r, 100, 3));
    r = reallocarray(r, 1000, 10);
    CHECK(r && intact(r, 100, 3));
    free(r);
    puts("ok reallocarray");
}

static void check_aligned(void) {
    static const size_t sizes[] = {0, 1, 8, 16, 100, 4096, 40000, 1 << 20, 3 << 20};
    for (size_t al = sizeof(void *); al <= ((size_t)16 << 20); al *= 2) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            void *p = (void *)1;
            CHECK(posix_memalign(&p, al, n) == 0);
            CHECK(p != NULL && (uintptr_t)p % al == 0);
            CHECK(malloc_usable_size(p) >= n);
            memset(p, 0x5A, n);
            free(p);
            p = aligned_alloc(al, n);
            CHECK(p != NULL && (uintptr_t)p % al == 0 && malloc_usable_size(p) >= n);
            memset(p, 0x5A, n);
            free(p);
            p = memalign(al, n);
            CHECK(p != NULL && (uintptr_t)p % al == 0 && malloc_usable_size(p) >= n);
            free(p);
        }
    }
    /* Bad alignments. */
    void *p = (void *)&p;
    CHECK(posix_memalign(&p, 0, 10) == EINVAL && p == (void *)&p);
    CHECK(posix_memalign(&p, 3, 10) == EINVAL);
    CHECK(posix_memalign(&p, 4, 10) == EINVAL); /* not a multiple of sizeof(void *) */
    CHECK(posix_memalign(&p, 24, 10) == EINVAL);
    CHECK(posix_memalign(&p, 64, SIZE_MAX / 2) == ENOMEM && p == (void *)&p);
    errno = 0;
    CHECK(aligned_alloc(3, 10) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(aligned_alloc(64, SIZE_MAX / 2) == NULL && errno == ENOMEM);
    /* memalign rounds an alignment up to a power of two, as glibc does. */
    void *m = memalign(48, 10);
    CHECK(m && (uintptr_t)m % 64 == 0);
    free(m);
    m = memalign(0, 10);
    CHECK(m);
    free(m);
    errno = 0;
    CHECK(memalign(SIZE_MAX, 10) == NULL && errno == EINVAL);
    /* valloc and pvalloc: page-aligned, pvalloc in whole pages. */
    long page = sysconf(_SC_PAGESIZE);
    void *v = valloc(10);
    CHECK(v && (uintptr_t)v % page == 0);
    free(v);
    v = pvalloc(1);
    CHECK(v && (uintptr_t)v % page == 0 && malloc_usable_size(v) >= (size_t)page);
    memset(v, 1, page);
    free(v);
    v = pvalloc(0);
    CHECK(v && (uintptr_t)v % page == 0);
    free(v);
    puts("ok posix_memalign aligned_alloc memalign valloc pvalloc");
}

static void check_libc_names(void) {
    struct specalloc_stats before = stats();
    void *a = __libc_malloc(100);
    void *b = __libc_calloc(10, 10);
    void *c = __libc_memalign(256, 100);
    CHECK(a && b && c && (uintptr_t)c % 256 == 0);
    for (int i = 0; i < 100; i++) CHECK(((unsigned char *)b)[i] == 0);
    a = __libc_realloc(a, 5000);
    CHECK(a);
    struct specalloc_stats mid = stats();
    CHECK(mid.allocs >= before.allocs + 4); /* served by specalloc, not glibc */
    CHECK(mid.live_objects == before.live_objects + 3);
    __libc_free(a);
    __libc_free(b);
    __libc_free(c);
    __libc_free(NULL);
    CHECK(stats().live_objects == before.live_objects);
    puts("ok __libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign");
}

/* The rest of glibc's exported entry points: what each returns is specalloc's, and can be freed
 * by free, cfree, free_sized, free_aligned_sized and __libc_free alike. */
static void check_more_names(void) {
    CHECK(cfree != NULL && free_sized != NULL && free_aligned_sized != NULL);
    struct specalloc_stats before = stats();
    void *(*make[])(size_t) = {__libc_valloc, __libc_pvalloc, valloc, pvalloc, malloc,
                               __libc_malloc};
    int nmake = (int)(sizeof make / sizeof make[0]);
    for (int m = 0; m < nmake; m++) {
        for (int f = 0; f < 5; f++) {
            size_t n = 100 + 1000 * (size_t)f;
            unsigned char *p = make[m](n);
            CHECK(p);
            if (m < 4) CHECK((uintptr_t)p % 4096 == 0);
            if (m == 1 || m == 3) CHECK(malloc_usable_size(p) >= 4096);
            CHECK(malloc_usable_size(p) >= n);
            memset(p, 0x5a, n);
            CHECK(stats().live_objects == before.live_objects + 1); /* specalloc's block */
            switch (f) {
            case 0: free(p); break;
            case 1: cfree(p); break;
            case 2: free_sized(p, n); break;
            case 3: free_aligned_sized(p, m < 4 ? 4096 : 16, n); break;
            case 4: __libc_free(p); break;
            }
            CHECK(stats().live_objects == before.live_objects);
        }
    }
    /* The sized frees of aligned_alloc's and calloc's blocks, and of NULL. */
    void *a = aligned_alloc(256, 512);
    void *c = calloc(4, 25);
    CHECK(a && c && (uintptr_t)a % 256 == 0);
    free_aligned_sized(a, 256, 512);
    free_sized(c, 100);
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
    cfree(NULL);
    CHECK(stats().live_objects == before.live_objects);
    puts("ok __libc_valloc __libc_pvalloc cfree free_sized free_aligned_sized");
}

/* free leaves errno as it was (glibc and POSIX.1-2024 promise it): for every kind of block, and
 * under contention, where the allocator's locks sleep and wake (system calls that may fail). */
static void *errno_worker(void *arg) {
    long bad = 0;
    for (int i = 0; i < 4000; i++) {
        size_t size = (i % 3 == 0) ? 40000 + (size_t)(i % 7) * 9000 : 100 + (size_t)(i % 50) * 20;
        void *p = malloc(size);
        CHECK(p);
        ((char *)p)[0] = 1;
        errno = EILSEQ;
        free(p);
        if (errno != EILSEQ) bad++;
    }
    return (void *)bad;
}

static void check_free_keeps_errno(void) {
    size_t sizes[] = {8, 100, 5000, 40000, 300000, (size_t)3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = malloc(sizes[i]);
        void *q = NULL;
        CHECK(p && posix_memalign(&q, 16384, sizes[i]) == 0 && q);
        errno = EILSEQ;
        free(p);
        free(q);
        CHECK(errno == EILSEQ);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, errno_worker, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        CHECK(pthread_join(t[i], &bad) == 0);
        CHECK(bad == NULL);
    }
    puts("ok free keeps errno");
}

/* First operations of a thread: each thread's very first allocator call is a different one. */
static void *shared_block;
static void *first_op(void *arg) {
    switch ((int)(intptr_t)arg) {
    case 0: free(NULL); break;
    case 1: CHECK(malloc_usable_size(shared_block) >= 100); break;
    case 2: {
        void *p = realloc(NULL, 50);
        CHECK(p);
        free(p);
        break;
    }
    case 3: {
        void *p = NULL;
        CHECK(posix_memalign(&p, 64, 10) == 0 && p);
        free(p);
        break;
    }
    case 4: {
        void *p = calloc(3, 3);
        CHECK(p);
        free(p);
        break;
    }
    case 5: {
        /* Resize, then free, a block another thread allocated. */
        void *q = realloc(shared_block, 70000);
        CHECK(q && ((unsigned char *)q)[99] == 0x11);
        shared_block = NULL;
        free(q);
        break;
    }
    }
    return NULL;
}

static void check_first_ops(void) {
    shared_block = malloc(100);
    CHECK(shared_block);
    memset(shared_block, 0x11, 100);
    for (int i = 0; i < 6; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, first_op, (void *)(intptr_t)i) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    CHECK(shared_block == NULL);
    puts("ok first operations of a thread");
}

/* A constructor runs before main (and before most of libc's users): it may allocate. */
static void *early;
__attribute__((constructor(101))) static void before_main(void) {
    early = malloc(123);
    if (early) memset(early, 7, 123);
}

int main(void) {
    /* The library is preloaded (its extra functions resolve) and serves this program. */
    CHECK(specalloc_stats != NULL && specalloc_stats_print != NULL && specalloc_collect != NULL);
    struct specalloc_stats s0 = stats();
    CHECK(s0.allocs > 0);
    CHECK(early != NULL && ((unsigned char *)early)[122] == 7);
    free(early);
    check_malloc();
    check_calloc();
    check_realloc();
    check_aligned();
    check_libc_names();
    check_more_names();
    check_free_keeps_errno();
    check_first_ops();
    /* Nothing this program allocated is left: what is live now beyond the start is libc's
     * (stdout's buffer, the cached threads' TLS vectors), a handful of blocks. */
    struct specalloc_stats s1 = stats();
    CHECK(s1.live_objects <= s0.live_objects + 8);
    CHECK(s1.allocs > s0.allocs + 1000);
    CHECK(specalloc_stats_print(2) == 0);
    size_t back = specalloc_collect();
    printf("ok specalloc_stats specalloc_collect (%zu bytes returned)\n", back);
    return 0;
}
