/* The fork handlers of tests/c/nested_fork.c, in a library the program links, whose
 * constructor runs before libspecalloc.so's: `NESTED_FORK=MODE` (prepare, parent or child)
 * registers, before the allocator registers its own, a handler of that kind that forks once
 * (the nested child allocates and frees in every size range and exits; with
 * `NESTED_FORK_THREAD` set, it first starts a thread that does so and waits for it). So the handler runs
 * while the allocator's handlers hold its locks for the fork. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#define CHECK_EXIT _exit
#include "check.h"

#define KEEP(p) __asm__ volatile("" ::"r"(p) : "memory")

/* Allocates and frees in every size range (small, medium, over 1 MiB). */
void nested_work(int rounds) {
    static const size_t sizes[] = {8, 48, 200, 3000, 40000, 300000, 1500000};
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            char *p = malloc(sizes[i]);
            CHECK(p != NULL);
            KEEP(p);
            memset(p, 0x5a, sizes[i] < 4096 ? sizes[i] : 4096);
            free(p);
        }
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Waits for the child for at most 20 s; kills it and fails past that. */
void nested_wait_child(pid_t pid, const char *what) {
    double deadline = now() + 20;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "%s failed: status %d\n", what, status);
                _exit(1);
            }
            return;
        }
        CHECK(r == 0);
        if (now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fprintf(stderr, "%s hung\n", what);
            _exit(1);
        }
        usleep(1000);
    }
}

/* The handler: the first time it runs, it forks; the nested child works and exits. */
static atomic_int forked;

/* Whether the handler forked in this process since the last reset. */
int nested_forked(void) { return atomic_load(&forked); }
void nested_reset(void) { atomic_store(&forked, 0); }

/* A thread of the nested child (`NESTED_FORK_THREAD` set), which allocates. */
static void *nested_thread(void *arg) {
    (void)arg;
    nested_work(50);
    return NULL;
}

static void fork_in_handler(void) {
    if (atomic_exchange(&forked, 1)) return;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (getenv("NESTED_FORK_THREAD") != NULL) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, nested_thread, NULL) == 0);
            CHECK(pthread_join(t, NULL) == 0);
        }
        nested_work(200);
        _exit(0);
    }
    nested_wait_child(pid, "the child of the fork made by a fork handler");
}


__attribute__((constructor)) static void register_handler(void) {
    const char *mode = getenv("NESTED_FORK");
    if (mode == NULL) return;
    if (strcmp(mode, "prepare") == 0) {
        CHECK(pthread_atfork(fork_in_handler, NULL, NULL) == 0);
    } else if (strcmp(mode, "parent") == 0) {
        CHECK(pthread_atfork(NULL, fork_in_handler, NULL) == 0);
    } else if (strcmp(mode, "child") == 0) {
        CHECK(pthread_atfork(NULL, NULL, fork_in_handler) == 0);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        _exit(2);
    }
}
