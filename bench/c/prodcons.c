/* Producer/consumer: THREADS threads (default 4) in pairs, each pair a producer that allocates
 * messages (16 to 1,000 bytes) into a bounded queue of its own and a consumer that reads and
 * frees them, so every free is cross-thread. With an odd count the last thread is its own
 * consumer (it frees its messages once they leave a queue of the same length). The messages
 * are split between the producers: 3 million at scale 1, whatever the thread count. */
#include <string.h>
#include "common.h"

#define QUEUE 1024

struct pair {
    _Alignas(CACHE_LINE) unsigned char *queue[QUEUE];
    size_t head, tail;
    pthread_mutex_t mu;
    pthread_cond_t not_full, not_empty;
    uint64_t seed, sum;
    long messages;
};

static unsigned char *message(uint64_t *x) {
    size_t n = 16 + rng_next(x) % 985;
    unsigned char *m = malloc(n);
    DIE_IF(!m);
    memset(m, (int)(n & 0xff), n < 64 ? n : 64);
    m[0] = (unsigned char)n;
    m[1] = (unsigned char)(n >> 8);
    return m;
}

static uint64_t consume(unsigned char *m) {
    uint64_t n = (size_t)m[0] | ((size_t)m[1] << 8);
    free(m);
    return n;
}

static void *producer(void *arg) {
    struct pair *q = arg;
    uint64_t x = q->seed;
    for (long i = 0; i < q->messages; i++) {
        unsigned char *m = message(&x);
        pthread_mutex_lock(&q->mu);
        while (q->tail - q->head == QUEUE) pthread_cond_wait(&q->not_full, &q->mu);
        q->queue[q->tail++ % QUEUE] = m;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->mu);
    }
    return NULL;
}

static void *consumer(void *arg) {
    struct pair *q = arg;
    for (long i = 0; i < q->messages; i++) {
        pthread_mutex_lock(&q->mu);
        while (q->tail == q->head) pthread_cond_wait(&q->not_empty, &q->mu);
        unsigned char *m = q->queue[q->head++ % QUEUE];
        pthread_cond_signal(&q->not_full);
        pthread_mutex_unlock(&q->mu);
        q->sum += consume(m);
    }
    return NULL;
}

/* The odd thread out: producer and consumer of the same queue, without a lock. */
static void *alone(void *arg) {
    struct pair *q = arg;
    uint64_t x = q->seed;
    for (long i = 0; i < q->messages; i++) {
        if (q->tail - q->head == QUEUE) q->sum += consume(q->queue[q->head++ % QUEUE]);
        q->queue[q->tail++ % QUEUE] = message(&x);
    }
    while (q->head != q->tail) q->sum += consume(q->queue[q->head++ % QUEUE]);
    return NULL;
}

/* What a thread does: thread i of the pairs is the producer of pair i / 2 if i is even, its
 * consumer if odd; the odd thread out plays both. */
struct role {
    struct pair *q;
    void *(*play)(void *);
};

static void *play(void *arg) {
    struct role *r = arg;
    return r->play(r->q);
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 4);
    int pairs = threads / 2, producers = pairs + threads % 2;
    long per = share(3000000 * scale(argc, argv), producers);
    struct pair *q = cache_aligned((size_t)producers, sizeof *q);
    struct role *roles = calloc((size_t)threads, sizeof *roles);
    DIE_IF(!roles);
    for (int i = 0; i < producers; i++) {
        DIE_IF(pthread_mutex_init(&q[i].mu, NULL) != 0);
        DIE_IF(pthread_cond_init(&q[i].not_full, NULL) != 0);
        DIE_IF(pthread_cond_init(&q[i].not_empty, NULL) != 0);
        q[i].seed = (uint64_t)i + 5;
        q[i].messages = per;
    }
    for (int i = 0; i < 2 * pairs; i++) roles[i] = (struct role){&q[i / 2], i % 2 ? consumer : producer};
    if (threads % 2) roles[threads - 1] = (struct role){&q[pairs], alone};
    run_threads(threads, play, roles, sizeof *roles);
    uint64_t sum = 0;
    for (int i = 0; i < producers; i++) sum += q[i].sum;
    report("prodcons", threads, per * producers, "messages", sum);
    free(q);
    free(roles);
    return 0;
}
