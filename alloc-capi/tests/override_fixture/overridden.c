/* C code linked into a Rust binary built with specalloc's `override` feature
 * (tests/override.rs): it allocates and frees with malloc and friends, from the calling thread
 * and from threads it starts itself, and lets the C library allocate for it (strdup, asprintf,
 * open_memstream). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *c_alloc(size_t n) {
    unsigned char *p = malloc(n);
    if (p) memset(p, 0x5C, n);
    return p;
}

void c_free(void *p) { free(p); }

size_t c_usable(void *p) { return malloc_usable_size(p); }

/* A block the C library allocated itself (with whatever malloc the process uses). */
char *c_strdup(const char *s) { return strdup(s); }

char *c_format(int n) {
    char *s = NULL;
    if (asprintf(&s, "value %d and %s", n, "more") < 0) return NULL;
    return s;
}

/* Writes through a stdio memory stream, which grows its buffer with realloc. */
char *c_memstream(int lines) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (int i = 0; i < lines; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    return buf;
}

/* Threads started by C: each allocates, resizes and frees, and hands half its blocks to the
 * next thread, which frees them (cross-thread frees). Returns 0 when every block kept its
 * contents. */
#define BLOCKS 512
struct job {
    int ops;
    int failed;
    void *handed[BLOCKS];
    struct job *next;
};

static void *churn(void *arg) {
    struct job *j = arg;
    void *mine[BLOCKS] = {0};
    uint64_t x = (uintptr_t)j | 1;
    for (int i = 0; i < j->ops; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int k = (int)(x % BLOCKS);
        size_t n = 1 + x % 3000;
        if (mine[k]) {
            unsigned char *p = mine[k];
            if (p[0] != (unsigned char)k) j->failed = 1;
            free(p);
        }
        unsigned char *p = (x & 8) ? malloc(n) : realloc(NULL, n);
        if (!p) { j->failed = 1; return NULL; }
        p[0] = (unsigned char)k;
        mine[k] = p;
    }
    for (int k = 0; k < BLOCKS; k++) {
        if (k % 2) j->next->handed[k] = mine[k];
        else free(mine[k]);
    }
    return NULL;
}

int c_thread_churn(int threads, int ops) {
    struct job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *ts = calloc((size_t)threads, sizeof *ts);
    if (!jobs || !ts) return -1;
    for (int i = 0; i < threads; i++) {
        jobs[i].ops = ops;
        jobs[i].next = &jobs[(i + 1) % threads];
    }
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ts[i], NULL, churn, &jobs[i]) != 0) return -1;
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ts[i], NULL);
        failed |= jobs[i].failed;
    }
    /* The blocks each thread handed on, freed here, by the thread that started them all. */
    for (int i = 0; i < threads; i++)
        for (int k = 0; k < BLOCKS; k++) free(jobs[i].handed[k]);
    free(jobs);
    free(ts);
    return failed;
}
