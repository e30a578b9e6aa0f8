/* The process's first malloc after the program used up what the allocator needs to set itself
 * up (tests/setup.rs): `./first_malloc atfork` registers 60 fork handlers first (glibc grows
 * its array of handlers with malloc past 48), `./first_malloc keys` creates pthread keys until
 * the system has none left, `./first_malloc keys-taken` finds them all taken before it ran (by
 * tests/c/keys_lib.c, preloaded after libspecalloc.so). Then it allocates and frees in every size range, from this thread
 * and from threads that exit (one frees blocks of the other), forks, and prints
 * "first malloc ok MODE". A hang is caught by the alarm. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define KEEP(p) __asm__ volatile("" ::"r"(p) : "memory")

static const size_t sizes[] = {8, 48, 200, 3000, 40000, 300000, 1500000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void work(void) {
    for (int r = 0; r < 200; r++) {
        for (size_t i = 0; i < NSIZES; i++) {
            char *p = malloc(sizes[i]);
            CHECK(p != NULL);
            KEEP(p);
            memset(p, 0x5a, sizes[i] < 4096 ? sizes[i] : 4096);
            free(p);
        }
    }
}

/* Blocks a thread allocates, for another to free. */
static void *make_blocks(void *arg) {
    (void)arg;
    work();
    char **blocks = malloc(1000 * sizeof *blocks);
    CHECK(blocks != NULL);
    for (int i = 0; i < 1000; i++) {
        blocks[i] = malloc(sizes[i % NSIZES]);
        CHECK(blocks[i] != NULL);
        blocks[i][0] = (char)i;
    }
    return blocks;
}

static void *free_blocks(void *arg) {
    char **blocks = arg;
    for (int i = 0; i < 1000; i++) {
        CHECK(blocks[i][0] == (char)i);
        free(blocks[i]);
    }
    free(blocks);
    work();
    return NULL;
}

static void noop(void) {}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    alarm(60);
    int keys = 0;
    if (strcmp(mode, "atfork") == 0) {
        for (int i = 0; i < 60; i++) CHECK(pthread_atfork(noop, noop, noop) == 0);
    } else if (strcmp(mode, "keys") == 0) {
        pthread_key_t k;
        int r;
        while ((r = pthread_key_create(&k, NULL)) == 0) keys++;
        CHECK(r == EAGAIN && keys > 0);
    } else if (strcmp(mode, "keys-taken") == 0) {
        /* Taken before the allocator was loaded (tests/c/keys_lib.c). */
        pthread_key_t k;
        CHECK(pthread_key_create(&k, NULL) == EAGAIN);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    errno = 0;
    void *first = malloc(10);
    CHECK(first != NULL);
    free(first);
    for (int round = 0; round < 20; round++) {
        work();
        pthread_t a, b;
        void *blocks;
        CHECK(pthread_create(&a, NULL, make_blocks, NULL) == 0);
        CHECK(pthread_join(a, &blocks) == 0);
        CHECK(pthread_create(&b, NULL, free_blocks, blocks) == 0);
        CHECK(pthread_join(b, NULL) == 0);
    }
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        work();
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("first malloc ok %s\n", mode);
    return 0;
}
