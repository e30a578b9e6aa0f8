/* Cross-thread exchange (after xmalloc-test): THREADS threads (default 2) in a ring, each
 * allocating batches of 64 blocks (16 to 527 bytes) and handing each batch to the next thread,
 * which frees the blocks. Every thread is a producer for the next one and a consumer for the
 * previous one, so with two threads or more every block is freed by a thread other than the one
 * that allocated it (with one, the thread frees its own). The blocks are split between the
 * threads: 4 million at scale 1, whatever the thread count. */
#include <sched.h>
#include <stdatomic.h>
#include "common.h"

#define BATCH 64
#define MAILBOX 64

/* A single-producer single-consumer ring of batches: written by the previous thread, read by
 * its owner. Head and tail on cache lines of their own. */
struct mailbox {
    _Alignas(CACHE_LINE) _Atomic size_t head;
    _Alignas(CACHE_LINE) _Atomic size_t tail;
    _Alignas(CACHE_LINE) unsigned char **ring[MAILBOX];
};

struct worker {
    _Alignas(CACHE_LINE) struct mailbox *in, *out;
    uint64_t rng, sum;
    long batches;
};

static int post(struct mailbox *m, unsigned char **batch) {
    size_t t = atomic_load_explicit(&m->tail, memory_order_relaxed);
    if (t - atomic_load_explicit(&m->head, memory_order_acquire) == MAILBOX) return 0;
    m->ring[t % MAILBOX] = batch;
    atomic_store_explicit(&m->tail, t + 1, memory_order_release);
    return 1;
}

/* Frees every batch waiting in the worker's mailbox; returns how many. */
static long drain(struct worker *w) {
    struct mailbox *m = w->in;
    size_t h = atomic_load_explicit(&m->head, memory_order_relaxed);
    size_t t = atomic_load_explicit(&m->tail, memory_order_acquire);
    for (size_t i = h; i != t; i++) {
        unsigned char **batch = m->ring[i % MAILBOX];
        for (int j = 0; j < BATCH; j++) {
            unsigned char *b = batch[j];
            size_t n = (size_t)b[0] | (size_t)b[1] << 8;
            w->sum += n + b[n - 1];
            free(b);
        }
        free(batch);
        atomic_store_explicit(&m->head, i + 1, memory_order_release);
    }
    return (long)(t - h);
}

static void *work(void *arg) {
    struct worker *w = arg;
    long consumed = 0;
    for (long i = 0; i < w->batches; i++) {
        unsigned char **batch = malloc(BATCH * sizeof *batch);
        DIE_IF(!batch);
        for (int j = 0; j < BATCH; j++) {
            size_t n = 16 + rng_next(&w->rng) % 512;
            unsigned char *b = malloc(n);
            DIE_IF(!b);
            b[0] = (unsigned char)n;
            b[1] = (unsigned char)(n >> 8);
            b[n - 1] = (unsigned char)j;
            batch[j] = b;
        }
        /* The next thread's mailbox is full: free what came in meanwhile (so that the ring
         * cannot deadlock), giving the processor up while nothing does. */
        while (!post(w->out, batch)) {
            long n = drain(w);
            consumed += n;
            if (n == 0) sched_yield();
        }
        consumed += drain(w);
    }
    while (consumed < w->batches) {
        long n = drain(w);
        consumed += n;
        if (n == 0) sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long batches = share(4000000 * scale(argc, argv) / BATCH, threads);
    struct mailbox *boxes = cache_aligned((size_t)threads, sizeof *boxes);
    struct worker *w = cache_aligned((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        atomic_init(&boxes[i].head, 0);
        atomic_init(&boxes[i].tail, 0);
        w[i] = (struct worker){&boxes[i], &boxes[(i + 1) % threads], (uint64_t)i + 11, 0, batches};
    }
    run_threads(threads, work, w, sizeof *w);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) sum += w[i].sum;
    report("xmalloc", threads, batches * BATCH * threads, "allocations", sum);
    free(boxes);
    free(w);
    return 0;
}
