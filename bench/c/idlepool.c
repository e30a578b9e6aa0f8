/* An idle thread pool: each of THREADS worker threads (default 16) allocates 4 MiB (at scale 1) of
 * blocks of 64 B to 4 KiB, writing each; then every thread frees the first half of its own blocks
 * and the second half of the next thread's (cross-thread frees), and the threads block on a
 * condition variable without calling the allocator again. The main thread waits
 * IDLEPOOL_WAIT_MS milliseconds (default 3000) after the last free and prints the process's
 * resident set then, on stderr (`idle RSS: N KiB`), before it wakes the threads and joins them:
 * what a server's pool that finished its work and sleeps keeps. Stdout has the usual one
 * report line, the same for every allocator. With IDLEPOOL_STATS set, an allocator that exports
 * `specalloc_stats_print` prints its counters to stderr at that moment too. */
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

struct worker {
    _Alignas(CACHE_LINE) unsigned char **b;
    long n;
    uint64_t rng;
    uint64_t sum;
    struct worker *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage, arrived, threads;

/* Waits until every worker has arrived at stage `s`; the last one moves everybody on. */
static void barrier(int s) {
    pthread_mutex_lock(&mu);
    if (++arrived == threads) {
        arrived = 0;
        stage = s;
        pthread_cond_broadcast(&cv);
    }
    while (stage < s) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void *work(void *arg) {
    struct worker *w = arg;
    for (long i = 0; i < w->n; i++) {
        size_t n = 64 + rng_next(&w->rng) % (4096 - 64 + 1);
        unsigned char *p = malloc(n);
        DIE_IF(!p);
        memset(p, (int)(i & 0xff), n);
        w->b[i] = p;
    }
    barrier(1);
    /* The first half of our own blocks, the second half of the next worker's. */
    for (long i = 0; i < w->n / 2; i++) {
        w->sum += w->b[i][0];
        free(w->b[i]);
    }
    for (long i = w->next->n / 2; i < w->next->n; i++) {
        w->sum += w->next->b[i][0];
        free(w->next->b[i]);
    }
    barrier(2);
    /* Idle: blocked until the main thread has measured. */
    pthread_mutex_lock(&mu);
    while (stage < 3) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* This process's resident set now, KiB (from /proc/self/statm). */
static long rss_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    threads = thread_count(argc, argv, 16);
    /* 4 MiB of blocks averaging about 2 KiB per thread at scale 1. */
    long per = share(4.0 * 1024 * 1024 / 2080 * threads * scale(argc, argv), threads);
    const char *env = getenv("IDLEPOOL_WAIT_MS");
    long wait_ms = env ? atol(env) : 3000;
    struct worker *ws = cache_aligned((size_t)threads, sizeof *ws);
    for (int i = 0; i < threads; i++) {
        ws[i].b = malloc((size_t)per * sizeof *ws[i].b);
        DIE_IF(!ws[i].b);
        ws[i].n = per;
        ws[i].rng = 0x9e3779b97f4a7c15ull + (uint64_t)i * 7919;
        ws[i].next = &ws[(i + 1) % threads];
    }
    pthread_t *t = malloc((size_t)threads * sizeof *t);
    DIE_IF(!t);
    for (int i = 0; i < threads; i++) DIE_IF(pthread_create(&t[i], NULL, work, &ws[i]) != 0);
    /* Wait for the last free (stage 2), then for the idle time. */
    pthread_mutex_lock(&mu);
    while (stage < 2) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    struct timespec d = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
    fprintf(stderr, "idle RSS: %ld KiB\n", rss_kib());
    if (getenv("IDLEPOOL_STATS")) {
        int (*print)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "specalloc_stats_print");
        if (print) print(2);
    }
    pthread_mutex_lock(&mu);
    stage = 3;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) {
        DIE_IF(pthread_join(t[i], NULL) != 0);
        sum += ws[i].sum;
        free(ws[i].b);
    }
    free(t);
    free(ws);
    report("idlepool", threads, per * threads, "blocks", sum);
    return 0;
}
