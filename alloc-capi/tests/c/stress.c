/* A stress test under LD_PRELOAD (tests/stress.rs): worker threads churn blocks of every size
 * through shared slots, so most blocks are freed (or resized) by a thread other than the one
 * that allocated them; a spawner starts short threads that exit mid-stream; the main thread
 * forks under load (children allocate, free the parent's blocks, start a thread, and some
 * exec). Every block carries a pattern checked before it is freed. At the end every slot is
 * drained and the counters must be back at the baseline: nothing lost. Prints "ok ..." lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "specalloc.h"

#pragma weak specalloc_stats

#define CHECK_EXIT _exit
#include "check.h"

#define SLOTS 2048
#define WORKERS 3
#define WORKER_OPS 150000
#define SHORT_THREADS 120
#define SHORT_OPS 400
#define FORKS 8

/* A block: its size in the first word, a pattern in the rest of its head and in its last byte. */
static _Atomic(unsigned char *) slots[SLOTS];
static atomic_int running = 1;

static struct specalloc_stats stats(void) {
    struct specalloc_stats s;
    CHECK(specalloc_stats(&s, sizeof s) == sizeof s);
    return s;
}

static uint64_t next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static size_t pick_size(uint64_t *rng) {
    uint64_t r = next(rng) % 1000;
    if (r < 500) return 8 + next(rng) % 120;          /* small */
    if (r < 900) return 128 + next(rng) % 4000;       /* medium small */
    if (r < 990) return 4096 + next(rng) % 60000;     /* up to 64 KiB: classes and page runs */
    if (r < 998) return 65536 + next(rng) % 900000;   /* page runs */
    return (1 << 20) + next(rng) % (3 << 20);         /* own mappings */
}

static unsigned char tag(size_t n, size_t i) { return (unsigned char)(n * 7 + i * 13); }

static void stamp(unsigned char *p, size_t n) {
    CHECK(n >= 8 && malloc_usable_size(p) >= n);
    memcpy(p, &n, sizeof n);
    size_t head = n < 64 ? n : 64;
    for (size_t i = 8; i < head; i++) p[i] = tag(n, i);
    if (n > 8) p[n - 1] = tag(n, n - 1);
}

static size_t verify(const unsigned char *p) {
    size_t n;
    memcpy(&n, p, sizeof n);
    size_t head = n < 64 ? n : 64;
    for (size_t i = 8; i < head; i++) CHECK(p[i] == tag(n, i));
    CHECK(n == 8 || p[n - 1] == tag(n, n - 1));
    return n;
}

/* One operation: make a block (malloc, calloc, aligned), put it in a random slot, and deal
 * with what was there (verify, maybe resize, free). */
static void op(uint64_t *rng) {
    size_t n = pick_size(rng);
    unsigned char *p;
    switch (next(rng) % 8) {
    case 0:
        p = calloc(1, n);
        CHECK(p && p[n / 2] == 0 && p[n - 1] == 0);
        break;
    case 1: {
        size_t al = (size_t)8 << (next(rng) % 10);
        CHECK(posix_memalign((void **)&p, al, n) == 0 && (uintptr_t)p % al == 0);
        break;
    }
    default:
        p = malloc(n);
        CHECK(p);
    }
    stamp(p, n);
    unsigned char *old = atomic_exchange(&slots[next(rng) % SLOTS], p);
    if (!old) return;
    size_t m = verify(old);
    if (next(rng) % 4 == 0) {
        size_t grow = pick_size(rng);
        unsigned char *q = realloc(old, grow);
        CHECK(q);
        size_t keep = m < grow ? m : grow;
        size_t head = keep < 64 ? keep : 64;
        for (size_t i = 8; i < head; i++) CHECK(q[i] == tag(m, i));
        old = q;
    }
    free(old);
}

static void *worker(void *arg) {
    uint64_t rng = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
    for (int i = 0; i < WORKER_OPS; i++) op(&rng);
    return NULL;
}

static void *short_thread(void *arg) {
    uint64_t rng = 0xD1B54A32D192ED03ull * ((uintptr_t)arg + 7);
    for (int i = 0; i < SHORT_OPS; i++) op(&rng);
    return NULL; /* exits with blocks it made still in the slots */
}

static void *spawner(void *arg) {
    (void)arg;
    for (int i = 0; i < SHORT_THREADS; i += 2) {
        pthread_t a, b;
        CHECK(pthread_create(&a, NULL, short_thread, (void *)(intptr_t)i) == 0);
        CHECK(pthread_create(&b, NULL, short_thread, (void *)(intptr_t)(i + 1)) == 0);
        CHECK(pthread_join(a, NULL) == 0 && pthread_join(b, NULL) == 0);
    }
    return NULL;
}

static void *child_thread(void *arg) {
    uint64_t rng = (uintptr_t)arg | 1;
    for (int i = 0; i < 2000; i++) op(&rng);
    return NULL;
}

/* In a child of a fork under load: allocate, free blocks the parent's threads made, start a
 * thread; some children exec this program again. */
static void in_child(int k, const char *self) {
    alarm(30); /* a deadlocked child is killed, and the parent sees it */
    uint64_t rng = 0xABCDEFull + (uint64_t)k;
    for (int i = 0; i < 3000; i++) op(&rng);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, child_thread, (void *)(intptr_t)(k + 100)) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    if (k % 3 == 0) {
        execl(self, self, "exec", (char *)NULL);
        CHECK(!"exec failed");
    }
    exit(0);
}

int main(int argc, char **argv) {
    CHECK(specalloc_stats != NULL);
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        /* Exec'd by a forked child: a fresh image on specalloc. */
        uint64_t rng = 77;
        for (int i = 0; i < 5000; i++) op(&rng);
        for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slots[i], NULL));
        CHECK(stats().allocs > 5000);
        return 0;
    }
    /* Warm-up: as many threads as the stress runs at once, so that glibc's caches of thread
     * stacks (and their TLS vectors, which it mallocs) are in the baseline. */
    pthread_t ts[WORKERS + 3];
    for (int i = 0; i < WORKERS + 3; i++) CHECK(pthread_create(&ts[i], NULL, short_thread, (void *)(intptr_t)(1000 + i)) == 0);
    for (int i = 0; i < WORKERS + 3; i++) CHECK(pthread_join(ts[i], NULL) == 0);
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slots[i], NULL));
    struct specalloc_stats s0 = stats();

    pthread_t w[WORKERS], sp;
    for (int i = 0; i < WORKERS; i++) CHECK(pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i) == 0);
    CHECK(pthread_create(&sp, NULL, spawner, NULL) == 0);
    int children_ok = 0;
    for (int k = 0; k < FORKS; k++) {
        usleep(20000);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) in_child(k, argv[0]);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "child %d: status %d\n", k, st);
            _exit(1);
        }
        children_ok++;
    }
    for (int i = 0; i < WORKERS; i++) CHECK(pthread_join(w[i], NULL) == 0);
    CHECK(pthread_join(sp, NULL) == 0);
    atomic_store(&running, 0);
    printf("ok %d forks under load, children and exec'd images exited 0\n", children_ok);

    struct specalloc_stats s1 = stats();
    CHECK(s1.remote_frees > s0.remote_frees + 1000);
    size_t drained = 0;
    for (int i = 0; i < SLOTS; i++) {
        unsigned char *p = atomic_exchange(&slots[i], NULL);
        if (p) {
            verify(p);
            free(p);
            drained++;
        }
    }
    struct specalloc_stats s2 = stats();
    printf("ok %zu blocks drained; %llu allocations, %llu remote frees\n", drained,
           (unsigned long long)(s2.allocs - s0.allocs),
           (unsigned long long)(s2.remote_frees - s0.remote_frees));
    fprintf(stderr, "baseline live %llu in use %llu heaps %llu; end live %llu in use %llu heaps %llu threads %llu\n",
            (unsigned long long)s0.live_objects, (unsigned long long)s0.bytes_in_use,
            (unsigned long long)s0.heaps, (unsigned long long)s2.live_objects,
            (unsigned long long)s2.bytes_in_use, (unsigned long long)s2.heaps,
            (unsigned long long)s2.threads);
    /* Nothing lost: what is live is what was live before (give or take stdio's buffer and
     * glibc's cached thread stacks' TLS vectors), and the heaps of the exited threads were
     * reused, not made anew for each of the short threads. */
    CHECK(s2.live_objects <= s0.live_objects + 16);
    CHECK(s2.bytes_in_use <= s0.bytes_in_use + 64 * 1024);
    CHECK(s2.heaps <= s0.heaps + WORKERS + 4);
    CHECK(s2.threads <= s0.threads + 1);
    puts("ok back to the baseline");
    return 0;
}
