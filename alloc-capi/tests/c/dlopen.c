/* dlopen/dlclose of a library that allocates (c/dlib.c), 200 times, from the main thread and
 * from threads (whose TLS block for the library glibc mallocs on first use): run with
 * libspecalloc.so preloaded (tests/stress.rs). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specalloc.h"

#pragma weak specalloc_stats

#include "check.h"

typedef char *(*make_fn)(int);
static make_fn make;

static void *use(void *arg) {
    int n = (int)(long)arg;
    char *s = make(n);
    CHECK(s && strlen(s) == (size_t)n);
    free(s);
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 2 && specalloc_stats != NULL);
    struct specalloc_stats s0, s1;
    for (int round = 0; round < 200; round++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        make = (make_fn)dlsym(h, "dlib_make");
        CHECK(make != NULL);
        use((void *)(long)(round + 1));
        pthread_t t;
        CHECK(pthread_create(&t, NULL, use, (void *)(long)(round + 500)) == 0);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(dlclose(h) == 0);
        if (round == 9) CHECK(specalloc_stats(&s0, sizeof s0) == sizeof s0);
    }
    CHECK(specalloc_stats(&s1, sizeof s1) == sizeof s1);
    fprintf(stderr, "live objects after 10 rounds %llu, after 200 %llu\n",
            (unsigned long long)s0.live_objects, (unsigned long long)s1.live_objects);
    /* Loading and unloading leaks nothing: the live objects after 200 rounds are those after
     * 10 (give or take the loader's caches). */
    CHECK(s1.live_objects <= s0.live_objects + 8);
    puts("ok 200 dlopen/dlclose rounds");
    return 0;
}
