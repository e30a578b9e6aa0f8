/* Producer/consumer: 2 producers allocate messages (16 to 1,000 bytes) into a bounded queue, 2
 * consumers read and free them: every free is cross-thread. */
#include <pthread.h>
#include <string.h>
#include "common.h"

#define QUEUE 1024

static unsigned char *queue[QUEUE];
static size_t head, tail;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static long per_producer;
static uint64_t total[2];

static void *produce(void *arg) {
    uint64_t x = (uintptr_t)arg + 5;
    for (long i = 0; i < per_producer; i++) {
        size_t n = 16 + rng_next(&x) % 985;
        unsigned char *m = malloc(n);
        DIE_IF(!m);
        memset(m, (int)(n & 0xff), n < 64 ? n : 64);
        m[0] = (unsigned char)n;
        m[1] = (unsigned char)(n >> 8);
        pthread_mutex_lock(&mu);
        while (tail - head == QUEUE) pthread_cond_wait(&not_full, &mu);
        queue[tail++ % QUEUE] = m;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void *consume(void *arg) {
    uint64_t *sum = arg;
    for (long i = 0; i < per_producer; i++) {
        pthread_mutex_lock(&mu);
        while (tail == head) pthread_cond_wait(&not_empty, &mu);
        unsigned char *m = queue[head++ % QUEUE];
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&mu);
        *sum += (size_t)m[0] | ((size_t)m[1] << 8);
        free(m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    per_producer = 1500000 * scale(argc, argv);
    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++) DIE_IF(pthread_create(&c[i], NULL, consume, &total[i]) != 0);
    for (int i = 0; i < 2; i++) DIE_IF(pthread_create(&p[i], NULL, produce, (void *)(intptr_t)i) != 0);
    for (int i = 0; i < 2; i++) DIE_IF(pthread_join(p[i], NULL) != 0);
    for (int i = 0; i < 2; i++) DIE_IF(pthread_join(c[i], NULL) != 0);
    printf("prodcons %ld messages bytes %llu\n", 2 * per_producer,
           (unsigned long long)(total[0] + total[1]));
    return 0;
}
