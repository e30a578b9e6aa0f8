/* The fork child handler of tests/c/nested_fork_return.c, in a library the program links,
 * whose constructor runs before libspecalloc.so's (so the handler runs while the allocator's
 * handlers hold its locks for the fork): the first time it runs, it forks, and both processes
 * return from it (the nested child goes on through the rest of the outer fork's handlers). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define CHECK_EXIT _exit
#include "check.h"

static atomic_int forked;
static atomic_int in_nested_child;

/* Whether this process is the child of the fork the handler made. */
int nested_return_is_nested_child(void) { return atomic_load(&in_nested_child); }

static void fork_in_child_handler(void) {
    if (atomic_exchange(&forked, 1)) return;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) atomic_store(&in_nested_child, 1);
}

__attribute__((constructor)) static void register_handler(void) {
    CHECK(pthread_atfork(NULL, NULL, fork_in_child_handler) == 0);
}
