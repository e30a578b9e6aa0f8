/* A program for the heap profiler's test: known amounts from known functions.
 * keep_records: 20,000 blocks of 400 B kept (8 MB); churn_buffers: 10,000 blocks of 8 KiB
 * allocated and freed (81.92 MB); keep_huge: 8 blocks of 4 MiB kept (32 MiB); grow_buffer: one
 * buffer grown by realloc to 64 MiB, kept. Then, with `signal`, raises SIGUSR2 and waits for
 * the dump; `fork`: the child allocates and exits too (its own file); `storm`: one thread sends
 * SIGUSR2 (a dump request) every 200 us while the main thread forks 20 children that allocate
 * and exit; `dlopen`: one thread loads and unloads a library 2,000 times while the main
 * thread's sampled allocations walk their stacks (nothing may hang or crash). */
#include <dlfcn.h>
#include <pthread.h>
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

static void *huge[8];
static char *grown;

__attribute__((noinline)) void keep_huge(void) {
    for (int i = 0; i < 8; i++) {
        huge[i] = malloc(4 << 20);
        memset(huge[i], 1, 4096);
    }
}

__attribute__((noinline)) void grow_buffer(void) {
    size_t n = 4096;
    grown = malloc(n);
    while (n < ((size_t)64 << 20)) {
        n *= 2;
        grown = realloc(grown, n);
        grown[n - 1] = 1;
    }
}

static volatile int storming;

static void *send_usr2(void *arg) {
    (void)arg;
    while (storming) {
        kill(getpid(), SIGUSR2);
        usleep(200);
    }
    return NULL;
}

static int storm(void) {
    storming = 1;
    pthread_t a;
    pthread_create(&a, NULL, send_usr2, NULL);
    for (int i = 0; i < 20; i++) {
        churn_buffers();
        pid_t pid = fork();
        if (pid == 0) {
            churn_buffers();
            exit(0);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0) {
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    }
    storming = 0;
    pthread_join(a, NULL);
    return 0;
}

static void *load_unload(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        void *h = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
        if (h) dlclose(h);
    }
    storming = 0;
    return NULL;
}

static int dlopen_storm(void) {
    storming = 1;
    pthread_t a;
    pthread_create(&a, NULL, load_unload, NULL);
    while (storming) churn_buffers();
    pthread_join(a, NULL);
    return 0;
}

int main(int argc, char **argv) {
    keep_records();
    churn_buffers();
    keep_huge();
    grow_buffer();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "signal") == 0) {
            raise(SIGUSR2);
            /* The profiler's thread writes the dump: give it time, allocating meanwhile. */
            churn_buffers();
            sleep(2);
        } else if (strcmp(argv[i], "storm") == 0) {
            if (storm() != 0) return 1;
        } else if (strcmp(argv[i], "dlopen") == 0) {
            if (dlopen_storm() != 0) return 1;
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
