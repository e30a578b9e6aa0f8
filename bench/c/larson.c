/* Larson-style server: each of 2 worker threads owns a set of blocks and replaces random ones;
 * after a number of rounds a worker exits and a new thread inherits its set, so blocks are freed
 * by threads other than the one that allocated them (cross-thread frees, thread churn). */
#include <pthread.h>
#include <string.h>
#include "common.h"

#define SET 4000
#define ROUNDS_PER_THREAD 200000

struct set {
    unsigned char *b[SET];
    uint64_t rng;
    uint64_t sum;
};

static void *serve(void *arg) {
    struct set *s = arg;
    for (long i = 0; i < ROUNDS_PER_THREAD; i++) {
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
    long generations = 20 * scale(argc, argv);
    struct set sets[2];
    memset(sets, 0, sizeof sets);
    sets[0].rng = 1;
    sets[1].rng = 2;
    for (long g = 0; g < generations; g++) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++) DIE_IF(pthread_create(&t[i], NULL, serve, &sets[i]) != 0);
        for (int i = 0; i < 2; i++) DIE_IF(pthread_join(t[i], NULL) != 0);
        /* The next generation's threads swap sets: every block changes hands. */
        struct set tmp = sets[0];
        sets[0] = sets[1];
        sets[1] = tmp;
    }
    uint64_t sum = sets[0].sum + sets[1].sum;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < SET; k++) free(sets[i].b[k]);
    printf("larson %ld generations checksum %llu\n", generations, (unsigned long long)sum);
    return 0;
}
