/* Shared by the C workloads of the C-workload table (bench/src/bin/ctable.rs) and the scaling
 * table (bench/src/bin/scaling.rs): a fast PRNG, the amount of work and the thread count from
 * the command line, starting and joining threads, and the one-line report. Each workload prints
 * one line whose value depends only on its inputs, so that every allocator must print the
 * same.
 *
 * Command line of every workload: PROGRAM [SCALE [THREADS]]. SCALE multiplies the amount of
 * work (default 1; a fraction such as 0.01 for a tiny run); THREADS, where the program takes
 * it, is the number of threads, and the total work stays the same whatever it is (it is split
 * between the threads), so that a run takes about as long at 16 threads as at 1 on an
 * allocator that scales. */
#ifndef CTABLE_COMMON_H
#define CTABLE_COMMON_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_LINE 64

/* A workload that C++ compiles too (larsonspawn.c as `larsonsized`) declares its per-thread
 * state's alignment with ALIGN_LINE. */
#ifdef __cplusplus
#define ALIGN_LINE alignas(CACHE_LINE)
#else
#define ALIGN_LINE _Alignas(CACHE_LINE)
#endif

/* A working set's blocks: malloc and free, or, compiled as C++ with SIZED defined, C++'s
 * `new[]` and sized `delete[]` (the field's larson-sized: a C++ server's allocations reach the
 * allocator through operator new and delete). */
#if defined(__cplusplus) && defined(SIZED)
#define BLOCK_NEW(n) (new unsigned char[n])
#define BLOCK_DELETE(p, n) (::operator delete[]((p), (n)))
#else
#define BLOCK_NEW(n) ((unsigned char *)malloc(n))
#define BLOCK_DELETE(p, n) free(p)
#endif

static inline uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

#define DIE_IF(c)                                                                             \
    do {                                                                                      \
        if (c) {                                                                              \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Replaces slot k of a working set (blocks and their lengths) with a new block of n bytes,
 * writing its first byte (`mark`) and its last (n); the old block's first and last byte go into
 * *sum before it is freed. */
static inline void replace_slot(unsigned char **slot, size_t *len, size_t k, size_t n,
                                unsigned char mark, uint64_t *sum) {
    if (slot[k]) {
        *sum += slot[k][0] + slot[k][len[k] - 1];
        BLOCK_DELETE(slot[k], len[k]);
    }
    unsigned char *b = BLOCK_NEW(n);
    DIE_IF(!b);
    b[0] = mark;
    b[n - 1] = (unsigned char)n;
    slot[k] = b;
    len[k] = n;
}

/* Stops with the command line's form and what was wrong with it. */
static inline void bad_usage(char **argv, const char *what) {
    fprintf(stderr, "usage: %s [SCALE [THREADS]]: %s\n", argv[0], what);
    exit(2);
}

/* The workload's scale: argv[1] (a positive number, fractions allowed), default 1. */
static inline double scale(int argc, char **argv) {
    if (argc < 2) return 1.0;
    double s = atof(argv[1]);
    if (!(s > 0)) bad_usage(argv, "SCALE must be a positive number (1: the default work)");
    return s;
}

/* The number of threads: argv[2], default `dflt`; at most 1024. */
static inline int thread_count(int argc, char **argv, int dflt) {
    int t = argc > 2 ? atoi(argv[2]) : dflt;
    if (t < 1 || t > 1024) bad_usage(argv, "THREADS must be a whole number from 1 to 1024");
    return t;
}

/* `total` split between `parts`, at least 1 each. */
static inline long share(double total, int parts) {
    long n = (long)(total / parts);
    return n > 0 ? n : 1;
}

/* A zeroed array of n elements of `size` bytes starting on a cache line: with elements declared
 * _Alignas(CACHE_LINE), each thread's state has lines of its own, so that the workload itself
 * makes no false sharing (only the allocator may). */
static inline void *cache_aligned(size_t n, size_t size) {
    size_t bytes = (n * size + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    void *p = aligned_alloc(CACHE_LINE, bytes);
    DIE_IF(!p);
    return memset(p, 0, bytes);
}

/* Runs fn(args + i * stride) for i in 0..n, each on a thread of its own, and joins them. */
static inline void run_threads(int n, void *(*fn)(void *), void *args, size_t stride) {
    pthread_t *t = (pthread_t *)malloc((size_t)n * sizeof *t);
    DIE_IF(!t);
    for (int i = 0; i < n; i++)
        DIE_IF(pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * stride) != 0);
    for (int i = 0; i < n; i++) DIE_IF(pthread_join(t[i], NULL) != 0);
    free(t);
}

/* The report line of the multi-threaded workloads: NAME: T threads, N UNIT, checksum C
 * ("1 thread" for one). The
 * scaling table divides N by the wall time for the throughput. */
static inline void report(const char *name, int threads, long n, const char *unit,
                          uint64_t checksum) {
    printf("%s: %d thread%s, %ld %s, checksum %llu\n", name, threads, threads == 1 ? "" : "s", n,
           unit, (unsigned long long)checksum);
}
#endif
