/* glibc's bench-malloc-thread pattern: THREADS threads (default 2), each with a working set of
 * 1,000 slots of its own, replacing a random slot with a block of a random size up to 4 KiB
 * (as many sizes in each doubling, so mostly small ones), touching the block's first and last
 * byte. No block leaves its thread: this is the thread-local fast path under every thread at
 * once. The replacements are split between the threads: 20 million at scale 1, whatever the
 * thread count. */
#include "common.h"

#define SLOTS 1000

struct worker {
    _Alignas(CACHE_LINE) uint64_t rng;
    uint64_t sum;
    long ops;
};

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned char **slot = calloc(SLOTS, sizeof *slot);
    size_t *len = calloc(SLOTS, sizeof *len);
    DIE_IF(!slot || !len);
    for (long i = 0; i < w->ops; i++) {
        uint64_t r = rng_next(&w->rng);
        size_t k = (r >> 40) % SLOTS;
        /* 1 to 2^(b+1) bytes for b in 0..11. */
        size_t n = 1 + (r >> 8) % ((size_t)2 << (r % 12));
        replace_slot(slot, len, k, n, (unsigned char)i, &w->sum);
    }
    for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
    free(slot);
    free(len);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long ops = share(20000000 * scale(argc, argv), threads);
    struct worker *w = cache_aligned((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) w[i] = (struct worker){(uint64_t)i + 3, 0, ops};
    run_threads(threads, work, w, sizeof *w);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) sum += w[i].sum;
    report("mallocthread", threads, ops * threads, "allocations", sum);
    free(w);
    return 0;
}
