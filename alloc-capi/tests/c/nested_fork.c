/* fork() from inside a pthread_atfork handler (tests/atfork.rs): `NESTED_FORK=MODE
 * ./nested_fork [thread]`, linked with nested_fork_lib.c, whose constructor registers a
 * handler of kind MODE (prepare, parent or child) that forks once, before the allocator's own
 * handlers exist. With `thread`, another thread allocates and frees all along. The program
 * forks 3 times and prints "nested fork ok MODE" when every fork returned in every process; a
 * fork that hangs is caught by the alarm (the process waiting in fork()) or by the waiting
 * parent's deadline (a child that hangs). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_EXIT _exit
#include "check.h"

void nested_work(int rounds);
void nested_wait_child(pid_t pid, const char *what);
int nested_forked(void);
void nested_reset(void);

static atomic_int stop;
static void *worker(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) nested_work(1);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = getenv("NESTED_FORK");
    int with_thread = argc > 1 && strcmp(argv[1], "thread") == 0;
    CHECK(mode != NULL);
    /* A process that hangs in fork() dies here. */
    alarm(60);
    nested_work(1);
    pthread_t t;
    if (with_thread) CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    /* The process whose handler forked: the child for a child handler, else the parent. */
    int in_child = strcmp(mode, "child") == 0;
    for (int i = 0; i < 3; i++) {
        nested_reset();
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (in_child) CHECK(nested_forked() == 1);
            nested_work(100);
            _exit(0);
        }
        nested_wait_child(pid, "the child");
        CHECK(nested_forked() == !in_child);
    }
    if (with_thread) {
        atomic_store(&stop, 1);
        CHECK(pthread_join(t, NULL) == 0);
    }
    printf("nested fork ok %s%s\n", mode, with_thread ? " thread" : "");
    return 0;
}
