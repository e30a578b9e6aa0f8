/* fork() with pthread_atfork handlers that allocate and free, registered before, with and
 * after the allocator's own (tests/atfork.rs). `./atfork MODE` forks several times while
 * other threads allocate and prints "fork ok MODE" when every fork returned in both processes;
 * a fork that hangs is caught by the parent's alarm (the parent hangs in fork()) or by its
 * deadline on the child (the child hangs in a handler), and fails the program.
 *
 * The asm barriers keep the compiler from deleting the malloc/free pairs (without them the
 * handlers would allocate nothing and the test would pass falsely). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEEP(p) __asm__ volatile("" ::"r"(p) : "memory")

/* Blocks allocated by the worker threads, freed by the handlers (frees into other threads'
 * spans): a worker puts a block into an empty slot, a handler takes one out. */
static _Atomic(void *) foreign[64];

static void churn(size_t size, int n) {
    for (int i = 0; i < n; i++) {
        void *p = malloc(size);
        if (!p) abort();
        KEEP(p);
        memset(p, 0x5a, size < 64 ? size : 64);
        free(p);
    }
}

/* Allocates a large block, many small ones, and frees a foreign block if one is left. */
static void handler_work(void) {
    void *p = malloc(200000);
    KEEP(p);
    free(p);
    churn(48, 2000);
    for (int i = 0; i < 64; i++) free(atomic_exchange(&foreign[i], NULL));
}

static void prepare(void) { handler_work(); }
static void parent(void) { handler_work(); }
static void child(void) {
    void *p = malloc(200000);
    KEEP(p);
    free(p);
    churn(48, 20000);
}

static void register_all(void) {
    if (pthread_atfork(prepare, parent, child) != 0) abort();
}

/* Mode "ctor": registered from a constructor, before any allocation of main. */
static int mode_ctor;
__attribute__((constructor)) static void early(void) {
    const char *m = getenv("ATFORK_CTOR");
    if (m && *m == '1') {
        mode_ctor = 1;
        register_all();
    }
}

/* Threads that allocate and free (and hand blocks to the handlers) while main forks. */
static atomic_int stop;
static void *worker(void *arg) {
    (void)arg;
    unsigned seed = 1;
    while (!atomic_load(&stop)) {
        size_t size = 16 + rand_r(&seed) % 5000;
        churn(size, 50);
        int i = (int)(rand_r(&seed) % 64);
        void *p = malloc(100 + (size_t)i * 8);
        void *expected = NULL;
        if (!atomic_compare_exchange_strong(&foreign[i], &expected, p)) free(p);
    }
    return NULL;
}

static void *register_from_thread(void *arg) {
    (void)arg;
    void *p = malloc(100);
    KEEP(p);
    register_all();
    free(p);
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Waits for the child for at most 20 s; kills it and fails past that. */
static void wait_child(pid_t pid) {
    double deadline = now() + 20;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "child failed: status %d\n", status);
                exit(1);
            }
            return;
        }
        if (now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fprintf(stderr, "the child hung in a fork handler\n");
            exit(1);
        }
        usleep(1000);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "before";
    /* A parent that hangs in fork() (a prepare handler waiting on a lock) dies here. */
    alarm(60);
    if (strcmp(mode, "prepare") == 0) {
        /* The program: one handler registered before the first malloc. */
        pthread_atfork(prepare, NULL, NULL);
    } else if (strcmp(mode, "child") == 0) {
        pthread_atfork(NULL, NULL, child);
    } else if (strcmp(mode, "before") == 0) {
        register_all();
    } else if (strcmp(mode, "ctor") == 0) {
        if (!mode_ctor) {
            fprintf(stderr, "run with ATFORK_CTOR=1\n");
            return 2;
        }
    } else if (strcmp(mode, "library") != 0 && strcmp(mode, "thread") != 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    void *x = malloc(10);
    KEEP(x);
    free(x);
    if (strcmp(mode, "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, register_from_thread, NULL) != 0) abort();
        pthread_join(t, NULL);
    }
    pthread_t workers[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&workers[i], NULL, worker, NULL) != 0) abort();
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid < 0) abort();
        if (pid == 0) {
            /* The child allocates and starts a thread, then leaves without flushing stdio. */
            churn(100, 1000);
            pthread_t t;
            if (pthread_create(&t, NULL, register_from_thread, NULL) != 0) _exit(3);
            pthread_join(t, NULL);
            _exit(0);
        }
        wait_child(pid);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(workers[i], NULL);
    printf("fork ok %s\n", mode);
    return 0;
}
