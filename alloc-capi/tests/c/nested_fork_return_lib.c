/* The fork handler of tests/c/nested_fork_return.c, in a library the program links, whose
 * constructor runs before libspecalloc.so's (so the handler runs while the allocator's
 * handlers hold its locks for the fork): `NESTED_RETURN_MODE` (prepare, parent or child; child
 * when unset) is its kind. The first time it runs, it forks, and both processes return from it
 * (the nested child goes on through the rest of the outer fork's handlers: from a prepare
 * handler, it makes the outer fork itself). With `NESTED_RETURN_THREAD` set, the nested child
 * first starts a thread that allocates and frees (a block of the forking thread's among them),
 * and waits for it (at most 20 s). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_EXIT _exit
#include "check.h"

static atomic_int forked;
static atomic_int in_nested_child;

/* Whether this process is the child of the fork the handler made (or, from a prepare handler,
 * that child's own child through the outer fork). */
int nested_return_is_nested_child(void) { return atomic_load(&in_nested_child); }

/* The nested child's thread: frees `arg` (the forking thread's block), allocates and frees. */
static void *nested_thread(void *arg) {
    free(arg);
    for (size_t i = 0; i < 1000; i++) {
        size_t size = 8 + i * 41;
        char *p = malloc(size);
        CHECK(p != NULL);
        memset(p, 0x5a, size);
        free(p);
    }
    return NULL;
}

static void fork_in_handler(void) {
    if (atomic_exchange(&forked, 1)) return;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid != 0) return;
    atomic_store(&in_nested_child, 1);
    if (getenv("NESTED_RETURN_THREAD") != NULL) {
        /* A thread that waits forever is caught here (an alarm is not inherited). */
        alarm(20);
        char *block = malloc(3000);
        CHECK(block != NULL);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, nested_thread, block) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
}

__attribute__((constructor)) static void register_handler(void) {
    const char *mode = getenv("NESTED_RETURN_MODE");
    if (mode == NULL || strcmp(mode, "child") == 0) {
        CHECK(pthread_atfork(NULL, NULL, fork_in_handler) == 0);
    } else if (strcmp(mode, "parent") == 0) {
        CHECK(pthread_atfork(NULL, fork_in_handler, NULL) == 0);
    } else if (strcmp(mode, "prepare") == 0) {
        CHECK(pthread_atfork(fork_in_handler, NULL, NULL) == 0);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        _exit(2);
    }
}
