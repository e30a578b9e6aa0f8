/* Larson as the field's benchmark suite runs it (mimalloc-bench's `larson`): the main thread
 * allocates every worker's set of 5,000 blocks of 8 to 1,000 B, shuffles the blocks between
 * the sets, replaces each block four times over, then starts THREADS workers (default 2) and
 * sleeps until they are done. Each worker replaces random blocks of its set, then starts its
 * successor, which inherits the set, and exits without being joined: 20 generations. So the
 * blocks the main thread allocated are freed by workers while it sleeps, and a finished worker
 * may still be exiting while its successor runs. The replacements are split between the
 * workers: 20 million at scale 1, whatever the thread count.
 *
 * Compiled as C++ with SIZED defined it is `larsonsized`, the field's larson-sized: the same
 * work with the blocks from `new[]` and freed with sized `delete[]`. Compiled with POOL defined
 * it is `larsonpool`, a thread pool's server: the same work, each worker the only generation of
 * its chain (it runs to the end), so that threads that run at once keep their own blocks for
 * the whole run. */
#include <time.h>
#include "common.h"

#define SET 5000
#ifdef POOL
#define GENERATIONS 1
#else
#define GENERATIONS 20
#endif
/* Replacements per thread in all, at scale 1 and one thread. */
#define WORK (20 * 1000000)
#define MIN_SIZE 8
#define MAX_SIZE 1000

struct set {
    ALIGN_LINE unsigned char *b[SET];
    size_t len[SET];
    uint64_t rng;
    uint64_t sum;
    long rounds;
    int generation;
};

/* Chains done (GCC's atomic builtins, which C and C++ both have). */
static int done;
static pthread_attr_t detached;

static size_t block_size(uint64_t r) { return MIN_SIZE + (r >> 24) % (MAX_SIZE - MIN_SIZE + 1); }

static void *serve(void *arg) {
    struct set *s = (struct set *)arg;
    for (long i = 0; i < s->rounds; i++) {
        uint64_t r = rng_next(&s->rng);
        size_t k = r % SET;
        size_t n = block_size(r);
        replace_slot(s->b, s->len, k, n, (unsigned char)i, &s->sum);
    }
    if (++s->generation < GENERATIONS) {
        pthread_t t;
        DIE_IF(pthread_create(&t, &detached, serve, s) != 0);
    } else {
        __atomic_fetch_add(&done, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long rounds = share(WORK * scale(argc, argv), GENERATIONS * threads);
    struct set *sets = (struct set *)cache_aligned((size_t)threads, sizeof *sets);
    uint64_t rng = 4141;
    for (int i = 0; i < threads; i++) {
        sets[i].rng = (uint64_t)i + 1;
        sets[i].rounds = rounds;
        for (int k = 0; k < SET; k++)
            replace_slot(sets[i].b, sets[i].len, (size_t)k, block_size(rng_next(&rng)), 1,
                         &sets[i].sum);
    }
    /* Shuffle the blocks between the sets, then replace every block four times over. */
    for (long j = 0; j < (long)threads * SET; j++) {
        uint64_t r = rng_next(&rng);
        struct set *a = &sets[r % threads], *b = &sets[(r >> 16) % threads];
        size_t x = (r >> 24) % SET, y = (r >> 40) % SET;
        unsigned char *p = a->b[x];
        size_t n = a->len[x];
        a->b[x] = b->b[y];
        a->len[x] = b->len[y];
        b->b[y] = p;
        b->len[y] = n;
    }
    for (int round = 0; round < 4; round++)
        for (int i = 0; i < threads; i++)
            for (int k = 0; k < SET; k++)
                replace_slot(sets[i].b, sets[i].len, (size_t)k, block_size(rng_next(&rng)),
                             2, &sets[i].sum);
    DIE_IF(pthread_attr_init(&detached) != 0);
    DIE_IF(pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED) != 0);
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        DIE_IF(pthread_create(&t, &detached, serve, &sets[i]) != 0);
    }
    /* Sleep until every chain is done. */
    while (__atomic_load_n(&done, __ATOMIC_SEQ_CST) < threads) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) {
        sum += sets[i].sum;
        for (int k = 0; k < SET; k++) BLOCK_DELETE(sets[i].b[k], sets[i].len[k]);
    }
    free(sets);
#ifdef SIZED
    report("larsonsized", threads, rounds * GENERATIONS * threads, "allocations", sum);
#elif defined POOL
    report("larsonpool", threads, rounds * GENERATIONS * threads, "allocations", sum);
#else
    report("larsonspawn", threads, rounds * GENERATIONS * threads, "allocations", sum);
#endif
    return 0;
}
