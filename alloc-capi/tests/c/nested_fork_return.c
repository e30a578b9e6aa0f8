/* A fork whose child handler (tests/c/nested_fork_return_lib.c, registered before the
 * allocator's handlers) forks again, and the nested child returns from the handler, through
 * the rest of the outer fork's handlers: with the background purge on
 * (SPECALLOC_BACKGROUND_PURGE_MS), every process has one purge thread, as many threads as
 * the parent has. Prints "nested fork return ok" when the child and the nested child each
 * count the parent's number of threads and allocate. With `NESTED_RETURN_THREAD` set, the
 * nested child starts a thread in the handler first (nested_fork_return_lib.c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_EXIT _exit
#include "check.h"

int nested_return_is_nested_child(void);

/* The threads of this process. */
static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    CHECK(closedir(d) == 0);
    return n;
}

/* Waits for `pid`; 1 when it exited 0. */
static int waited_ok(pid_t pid) {
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
    alarm(60);
    free(malloc(100));
    /* The purge thread starts before main; let it run. */
    usleep(20000);
    int parent = threads();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int nested = nested_return_is_nested_child();
        /* A forked child's purge thread is started by the fork's child handler. */
        usleep(20000);
        int n = threads();
        char *p = malloc(3000);
        CHECK(p != NULL);
        memset(p, 1, 3000);
        free(p);
        if (n != parent) {
            fprintf(stderr, "%s: %d threads, the parent has %d\n",
                    nested ? "the nested child" : "the child", n, parent);
            _exit(1);
        }
        if (!nested) {
            /* The child's own child is the nested one (the handler forked in the child). */
            int ok = 1, status;
            while (wait(&status) > 0) ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
            _exit(ok ? 0 : 1);
        }
        _exit(0);
    }
    CHECK(waited_ok(pid));
    printf("nested fork return ok\n");
    return 0;
}
