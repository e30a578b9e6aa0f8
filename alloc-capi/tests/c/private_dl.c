/* libspecalloc.so loaded with dlopen as a private allocator (tests/programs.rs): the program's
 * malloc stays the C library's; `./private_dl LIB` calls the library's own malloc and free
 * (found with dlsym) from this thread and from 4 threads, closes the library while the
 * threads are alive, then lets them exit (their pthread-key destructors run), and exits.
 * Prints "private allocator ok" when every process step returned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
static malloc_fn lib_malloc;
static free_fn lib_free;

static pthread_barrier_t used, closed;

static void use(void) {
    for (int i = 0; i < 2000; i++) {
        size_t size = 8 + (size_t)(i % 50) * 40;
        char *p = lib_malloc(size);
        CHECK(p != NULL);
        memset(p, 1, size);
        lib_free(p);
    }
}

static void *thread(void *arg) {
    (void)arg;
    use();
    pthread_barrier_wait(&used);
    /* The library is closed now; this thread exits. */
    pthread_barrier_wait(&closed);
    return NULL;
}

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
    CHECK(argc == 2);
    alarm(60);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    lib_malloc = (malloc_fn)dlsym(h, "malloc");
    lib_free = (free_fn)dlsym(h, "free");
    CHECK(lib_malloc != NULL && lib_free != NULL && lib_malloc != malloc);
    CHECK(pthread_barrier_init(&used, NULL, 5) == 0);
    CHECK(pthread_barrier_init(&closed, NULL, 5) == 0);
    use();
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, thread, NULL) == 0);
    pthread_barrier_wait(&used);
    CHECK(dlclose(h) == 0);
    pthread_barrier_wait(&closed);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
    /* A thread started after the close (its exit runs every key's destructor). */
    pthread_t late;
    CHECK(pthread_create(&late, NULL, nothing, NULL) == 0);
    CHECK(pthread_join(late, NULL) == 0);
    puts("private allocator ok");
    return 0;
}
