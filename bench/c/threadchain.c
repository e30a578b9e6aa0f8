/* Many live threads: a chain of threads, each of which allocates a few blocks (BLOCKS, argv[2],
 * default 4), starts the next thread and waits for it before freeing them, so that every thread
 * of the chain is alive (and blocked) when the last one starts: 4,000 threads at scale 1. What it measures is what a
 * thread's start and its first allocations cost when thousands of threads already allocated
 * (a server with a thread per connection), and the memory each live thread holds. The threads
 * run on 64 KiB stacks. */
#include "common.h"

#define MAX_BLOCKS 64

/* Blocks each thread allocates: argv[2], default 4. */
static int blocks = 4;

struct link {
    long left;
    uint64_t rng;
};

static pthread_attr_t attr;

static void *step(void *arg) {
    struct link *me = arg;
    unsigned char *b[MAX_BLOCKS];
    uint64_t sum = 0;
    for (int i = 0; i < blocks; i++) {
        size_t n = 16 + rng_next(&me->rng) % 240;
        b[i] = malloc(n);
        DIE_IF(!b[i]);
        b[i][0] = (unsigned char)n;
        b[i][n - 1] = (unsigned char)i;
    }
    if (me->left > 0) {
        struct link next = {me->left - 1, me->rng};
        pthread_t t;
        void *ret;
        DIE_IF(pthread_create(&t, &attr, step, &next) != 0);
        DIE_IF(pthread_join(t, &ret) != 0);
        sum += (uint64_t)(uintptr_t)ret;
    }
    for (int i = 0; i < blocks; i++) {
        sum += b[i][0];
        free(b[i]);
    }
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
    long threads = share(4000 * scale(argc, argv), 1);
    if (argc > 2) {
        blocks = atoi(argv[2]);
        if (blocks < 1 || blocks > MAX_BLOCKS) {
            fprintf(stderr, "usage: %s [SCALE [BLOCKS]]: BLOCKS must be a whole number from 1 to %d\n",
                    argv[0], MAX_BLOCKS);
            exit(2);
        }
    }
    DIE_IF(pthread_attr_init(&attr) != 0);
    DIE_IF(pthread_attr_setstacksize(&attr, 64 * 1024) != 0);
    struct link first = {threads - 1, 7};
    pthread_t t;
    void *ret;
    DIE_IF(pthread_create(&t, &attr, step, &first) != 0);
    DIE_IF(pthread_join(t, &ret) != 0);
    pthread_attr_destroy(&attr);
    printf("threadchain: %ld threads live at once, checksum %llu\n", threads,
           (unsigned long long)(uintptr_t)ret);
    return 0;
}
