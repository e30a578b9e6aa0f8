/* Medium sizes across threads (rptest-like): each of THREADS threads (default 2) keeps a working
 * set of blocks of 8 to 16,000 bytes (sizes spread evenly over the powers of two, so that small
 * and medium blocks are both common) and replaces random ones; every BATCH replacements it also
 * sends BATCH blocks of its set to the next thread in a ring, which frees them, and allocates
 * new ones in their slots. So half the blocks die on another thread than the one that made
 * them, and the medium classes (1 to 16 KiB) see as many cross-thread frees as the small ones.
 * The replacements are split between the threads: 4 million at scale 1, whatever the thread
 * count. The checksum sums the first and last byte of every block freed, which depends only on
 * each thread's own sequence of allocations, not on the order in which threads run. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define SET 1024
#define BATCH 64
/* Batches a mailbox holds; a sender that finds it full frees the batch itself. */
#define MAILBOX 16

struct mailbox {
    pthread_mutex_t mu;
    int count;
    unsigned char *blocks[MAILBOX][BATCH];
    size_t lens[MAILBOX][BATCH];
};

struct worker {
    _Alignas(CACHE_LINE) unsigned char *b[SET];
    size_t len[SET];
    uint64_t rng, sum;
    long rounds;
    struct mailbox *in, *out;
};

/* 8 to 16,000 bytes: a power of two from 8 to 8,192 picked evenly, then a length up to twice
 * it (capped). */
static size_t block_size(uint64_t r) {
    size_t base = (size_t)8 << (r % 11);
    size_t n = base + (size_t)((r >> 8) % base);
    return n > 16000 ? 16000 : n;
}

/* Frees the blocks waiting in `m` (sent by the previous thread), adding their bytes to *sum. */
static void drain(struct mailbox *m, uint64_t *sum) {
    unsigned char *blocks[MAILBOX][BATCH];
    size_t lens[MAILBOX][BATCH];
    DIE_IF(pthread_mutex_lock(&m->mu) != 0);
    int n = m->count;
    memcpy(blocks, m->blocks, sizeof blocks[0] * (size_t)n);
    memcpy(lens, m->lens, sizeof lens[0] * (size_t)n);
    m->count = 0;
    DIE_IF(pthread_mutex_unlock(&m->mu) != 0);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < BATCH; k++) {
            *sum += blocks[i][k][0] + blocks[i][k][lens[i][k] - 1];
            free(blocks[i][k]);
        }
}

/* Sends BATCH random blocks of w's set to the next thread and allocates new ones in their
 * slots (if its mailbox is full, w frees them itself). */
static void send_batch(struct worker *w) {
    unsigned char *blocks[BATCH];
    size_t lens[BATCH];
    for (int k = 0; k < BATCH; k++) {
        uint64_t r = rng_next(&w->rng);
        size_t slot = r % SET;
        blocks[k] = w->b[slot];
        lens[k] = w->len[slot];
        size_t n = block_size(r >> 16);
        w->b[slot] = malloc(n);
        DIE_IF(!w->b[slot]);
        w->b[slot][0] = (unsigned char)r;
        w->b[slot][n - 1] = (unsigned char)n;
        w->len[slot] = n;
    }
    struct mailbox *m = w->out;
    DIE_IF(pthread_mutex_lock(&m->mu) != 0);
    int sent = m->count < MAILBOX;
    if (sent) {
        memcpy(m->blocks[m->count], blocks, sizeof blocks);
        memcpy(m->lens[m->count], lens, sizeof lens);
        m->count++;
    }
    DIE_IF(pthread_mutex_unlock(&m->mu) != 0);
    if (!sent)
        for (int k = 0; k < BATCH; k++) {
            w->sum += blocks[k][0] + blocks[k][lens[k] - 1];
            free(blocks[k]);
        }
}

static void *serve(void *arg) {
    struct worker *w = arg;
    for (long i = 0; i < w->rounds; i++) {
        uint64_t r = rng_next(&w->rng);
        size_t slot = r % SET;
        replace_slot(w->b, w->len, slot, block_size(r >> 16), (unsigned char)r, &w->sum);
        if (i % BATCH == BATCH - 1) {
            drain(w->in, &w->sum);
            send_batch(w);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long rounds = share(4000000 * scale(argc, argv), threads);
    struct worker *ws = cache_aligned((size_t)threads, sizeof *ws);
    struct mailbox *boxes = cache_aligned((size_t)threads, sizeof *boxes);
    for (int i = 0; i < threads; i++) {
        DIE_IF(pthread_mutex_init(&boxes[i].mu, NULL) != 0);
        ws[i].rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
        ws[i].rounds = rounds;
        ws[i].in = &boxes[i];
        ws[i].out = &boxes[(i + 1) % threads];
        for (int k = 0; k < SET; k++) {
            uint64_t r = rng_next(&ws[i].rng);
            replace_slot(ws[i].b, ws[i].len, (size_t)k, block_size(r >> 16), (unsigned char)r,
                         &ws[i].sum);
        }
    }
    run_threads(threads, serve, ws, sizeof *ws);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) {
        drain(&boxes[i], &ws[i].sum);
        for (int k = 0; k < SET; k++) {
            ws[i].sum += ws[i].b[k][0] + ws[i].b[k][ws[i].len[k] - 1];
            free(ws[i].b[k]);
        }
        sum += ws[i].sum;
        DIE_IF(pthread_mutex_destroy(&boxes[i].mu) != 0);
    }
    free(ws);
    free(boxes);
    report("medium", threads, rounds * threads, "allocations", sum);
    return 0;
}
