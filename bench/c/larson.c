/* Larson-style server: each of THREADS worker threads (default 2) owns a set of blocks and
 * replaces random ones; after a number of rounds every worker exits and the next generation's
 * threads inherit the sets, each moved on by one thread, so blocks are freed by threads other
 * than the one that allocated them (cross-thread frees, thread churn). The replacements are
 * split between the threads: 8 million at scale 1, whatever the thread count. */
#include <string.h>
#include "common.h"

#define SET 4000
#define GENERATIONS 20

struct set {
    _Alignas(CACHE_LINE) unsigned char *b[SET];
    uint64_t rng;
    uint64_t sum;
    long rounds;
};

static void *serve(void *arg) {
    struct set *s = *(struct set **)arg;
    for (long i = 0; i < s->rounds; i++) {
        uint64_t r = rng_next(&s->rng);
        size_t k = r % SET;
        size_t n = 16 + (r >> 24) % 500;
        if (s->b[k]) {
            s->sum += s->b[k][0];
            free(s->b[k]);
        }
        s->b[k] = malloc(n);
        DIE_IF(!s->b[k]);
        s->b[k][0] = (unsigned char)n;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long rounds = share(GENERATIONS * 400000 * scale(argc, argv), GENERATIONS * threads);
    struct set *sets = cache_aligned((size_t)threads, sizeof *sets);
    struct set **owner = malloc((size_t)threads * sizeof *owner);
    DIE_IF(!owner);
    for (int i = 0; i < threads; i++) {
        sets[i].rng = (uint64_t)i + 1;
        sets[i].rounds = rounds;
    }
    for (long g = 0; g < GENERATIONS; g++) {
        /* Generation g's thread i serves set (i + g) mod THREADS: every block changes hands. */
        for (int i = 0; i < threads; i++) owner[i] = &sets[(i + g) % threads];
        run_threads(threads, serve, owner, sizeof *owner);
    }
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) {
        sum += sets[i].sum;
        for (int k = 0; k < SET; k++) free(sets[i].b[k]);
    }
    free(sets);
    free(owner);
    report("larson", threads, rounds * GENERATIONS * threads, "allocations", sum);
    return 0;
}
