/* Shared by the C workloads of the C-workload table (bench/src/bin/ctable.rs): a fast PRNG,
 * a checksum and a scale factor from the command line. Each workload prints one line whose
 * value depends only on its inputs, so that every allocator must print the same. */
#ifndef CTABLE_COMMON_H
#define CTABLE_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The workload's scale: argv[1], default 1. */
static inline long scale(int argc, char **argv) {
    long s = argc > 1 ? atol(argv[1]) : 1;
    return s > 0 ? s : 1;
}

#define DIE_IF(c)                                                                             \
    do {                                                                                      \
        if (c) {                                                                              \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#endif
