/* A fork whose handler (tests/c/nested_fork_return_lib.c, registered before the allocator's
 * handlers; a prepare, parent or child handler by `NESTED_RETURN_MODE`) forks again, and the
 * nested child returns from the handler, through the rest of the outer fork's handlers: with
 * the background purge on (SPECALLOC_BACKGROUND_PURGE_MS), every process has one purge thread,
 * as many threads as the parent has. Every process that returns from the program's fork (the
 * parent, the child, the nested child, and from a prepare handler the nested child's own child
 * through the outer fork) counts its threads, allocates and waits for its children; the parent
 * prints "nested fork return ok" when all of them did. With `NESTED_RETURN_THREAD` set, the
 * nested child starts a thread in the handler first. */
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

int main(void) {
    alarm(60);
    free(malloc(100));
    /* The purge thread starts before main; let it run. */
    usleep(20000);
    int parent = threads();
    pid_t original = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    /* An alarm is not inherited: each process's own. */
    alarm(60);
    const char *who = nested_return_is_nested_child() ? "the nested child (or its child)"
                      : pid == 0                      ? "the child"
                                                      : "the parent";
    /* A forked child's purge thread is started by the fork's handlers. */
    usleep(20000);
    int n = threads();
    char *p = malloc(3000);
    CHECK(p != NULL);
    memset(p, 1, 3000);
    free(p);
    int ok = 1;
    if (n != parent) {
        fprintf(stderr, "%s: %d threads, the parent has %d\n", who, n, parent);
        ok = 0;
    }
    int status;
    while (wait(&status) > 0) ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (getpid() != original) _exit(ok ? 0 : 1);
    CHECK(ok);
    printf("nested fork return ok\n");
    return 0;
}
