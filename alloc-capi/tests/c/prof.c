/* A program for the heap profiler's test: known amounts from known functions.
 * keep_records: 20,000 blocks of 400 B kept (8 MB); churn_buffers: 10,000 blocks of 8 KiB
 * allocated and freed (81.92 MB); then, with `signal`, raises SIGUSR2 and allocates on, so a
 * dump is written before exit; `fork`: the child allocates and exits too (its own file). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *kept[20000];

__attribute__((noinline)) void keep_records(void) {
    for (int i = 0; i < 20000; i++) {
        kept[i] = malloc(400);
        memset(kept[i], 1, 400);
    }
}

__attribute__((noinline)) void churn_buffers(void) {
    for (int i = 0; i < 10000; i++) {
        char *volatile p = malloc(8192);
        p[0] = 1;
        free(p);
    }
}

int main(int argc, char **argv) {
    keep_records();
    churn_buffers();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "signal") == 0) {
            raise(SIGUSR2);
            /* The dump is written by a sampled allocation: allocate until one is. */
            churn_buffers();
        } else if (strcmp(argv[i], "fork") == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                churn_buffers();
                exit(0);
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
        }
    }
    printf("ok\n");
    return 0;
}
