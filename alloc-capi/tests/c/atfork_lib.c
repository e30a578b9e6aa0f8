/* A library preloaded after libspecalloc.so (tests/atfork.rs): its constructor registers fork
 * handlers that allocate and free, before the program's main makes its first allocation. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KEEP(p) __asm__ volatile("" ::"r"(p) : "memory")

static void work(void) {
    void *p = malloc(200000);
    KEEP(p);
    free(p);
    for (int i = 0; i < 5000; i++) {
        void *q = malloc(48);
        KEEP(q);
        memset(q, 1, 48);
        free(q);
    }
}

__attribute__((constructor)) static void register_handlers(void) {
    if (pthread_atfork(work, work, work) != 0) abort();
}
