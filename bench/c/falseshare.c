/* False sharing (after Hoard's cache-scratch): the main thread allocates one 8-byte object per
 * thread, one after the other, and hands object i to thread i, which frees it; then each of
 * the THREADS threads (default 2) allocates an 8-byte object, writes every byte of it 10,000
 * times, frees it, and starts again. An allocator that gives neighbouring blocks (one cache
 * line) to different threads makes the cores fight over that line on every write: the run takes
 * many times longer than with one thread, where an allocator that keeps each thread's blocks
 * apart scales. The objects are split between the threads: 24,000 at scale 1 (1.92
 * billion writes), whatever the thread count. */
#include "common.h"

#define OBJECT 8
#define REPEAT 10000

struct worker {
    _Alignas(CACHE_LINE) unsigned char *handed;
    long objects;
    uint64_t sum;
};

static void *work(void *arg) {
    struct worker *w = arg;
    free(w->handed);
    for (long i = 0; i < w->objects; i++) {
        volatile unsigned char *p = malloc(OBJECT);
        DIE_IF(!p);
        for (int k = 0; k < OBJECT; k++) p[k] = (unsigned char)k;
        for (int r = 0; r < REPEAT; r++)
            for (int k = 0; k < OBJECT; k++) p[k] = (unsigned char)(p[k] + k + r);
        w->sum += p[0] + p[OBJECT - 1];
        free((void *)p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = thread_count(argc, argv, 2);
    long objects = share(24000 * scale(argc, argv), threads);
    struct worker *w = cache_aligned((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        w[i].handed = malloc(OBJECT);
        DIE_IF(!w[i].handed);
        w[i].objects = objects;
    }
    run_threads(threads, work, w, sizeof *w);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) sum += w[i].sum;
    report("falseshare", threads, objects * threads * OBJECT * REPEAT, "writes", sum);
    free(w);
    return 0;
}
