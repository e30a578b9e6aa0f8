/* A successful call leaves errno as it was, even when a first try inside it failed: each case
 * runs in a child process under an address-space limit (RLIMIT_AS) set just above what it
 * needs, so that the allocator's roomier first try, or its first mapping before it gives back
 * the freed memory it keeps, is refused and the call still succeeds. errno is set to EILSEQ
 * before each call and must read EILSEQ after every call that returned a block. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_EXIT _exit
#include "check.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)

/* The process's address space now (the first field of /proc/self/statm, in pages). */
static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f);
    unsigned long pages = 0;
    CHECK(fscanf(f, "%lu", &pages) == 1);
    fclose(f);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Caps the address space at what is mapped now plus `headroom` bytes. */
static void cap(size_t headroom) {
    struct rlimit r;
    r.rlim_cur = r.rlim_max = vm_size() + headroom;
    CHECK(setrlimit(RLIMIT_AS, &r) == 0);
}

/* Fills `n` bytes at `p` with a pattern of `seed`. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
    p[n - 1] = (unsigned char)seed;
}

/* Whether `n` bytes at `p` hold `fill`'s pattern of `seed`. */
static int filled(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 4096)
        if (p[i] != (unsigned char)(seed + i / 4096)) return 0;
    return p[n - 1] == (unsigned char)seed;
}

/* A huge block grown from 300 to 400 MiB with room for 420 MiB: the roomier first try (half as
 * much again, 450 MiB) is refused, the exact size is granted. */
static void realloc_huge_grows(void) {
    unsigned char *p = malloc(300 * MIB);
    CHECK(p);
    fill(p, 300 * MIB, 3);
    cap(420 * MIB);
    errno = EILSEQ;
    unsigned char *q = realloc(p, 400 * MIB);
    CHECK(q);
    CHECK(errno == EILSEQ);
    CHECK(filled(q, 300 * MIB, 3));
    free(q);
    CHECK(errno == EILSEQ);
}

/* A 1 MiB page run grown past the page runs' sizes, to 1.1 MiB, copied to a huge block: the
 * roomier first try (1.5 MiB, mapped at a 4 MiB alignment) is refused, the exact size granted. */
static void realloc_medium_moves_to_huge(void) {
    unsigned char *p = malloc(MIB);
    CHECK(p);
    fill(p, MIB, 5);
    size_t want = MIB + 100 * KIB;
    /* The exact size's mapping: the block and its header page, and the slop of a 4 MiB
     * alignment; the roomier try needs 400 KiB more. */
    cap(want + 4 * MIB + 200 * KIB);
    errno = EILSEQ;
    unsigned char *q = realloc(p, want);
    CHECK(q);
    CHECK(errno == EILSEQ);
    CHECK(filled(q, MIB, 5));
    free(q);
    CHECK(errno == EILSEQ);
}

/* One allocation of `size` bytes by the call `kind` picks: 0 malloc, 1 calloc, 2 aligned_alloc,
 * 3 posix_memalign, 4 memalign, 5 valloc, 6 pvalloc, 7 realloc of NULL, 8 reallocarray of
 * NULL; the aligned ones at `align`. */
static void *one(int kind, size_t size, size_t align) {
    void *p = NULL;
    switch (kind) {
    case 0: return malloc(size);
    case 1: return calloc(1, size);
    case 2: return aligned_alloc(align, size);
    case 3: CHECK(posix_memalign(&p, align, size) == 0); return p;
    case 4: return memalign(align, size);
    case 5: return valloc(size);
    case 6: return pvalloc(size);
    case 7: return realloc(NULL, size);
    default: return reallocarray(NULL, size / 8, 8);
    }
}

#define KINDS 9
static const char *kind_names[KINDS] = {"malloc",  "calloc",  "aligned_alloc",
                                        "posix_memalign", "memalign", "valloc",
                                        "pvalloc", "realloc", "reallocarray"};

/* A freed huge block, which the allocator keeps, fills the capped address space: calls that
 * need a new chunk of page runs (`arg` / KINDS picks the size: small blocks, page runs) are
 * refused a mapping once, give the block back, and are granted. */
static void chunk_after_giving_back(int arg) {
    int kind = arg % KINDS;
    int small = arg / KINDS == 0;
    size_t size = small ? 200 : 600 * KIB;
    unsigned char *big = malloc(48 * MIB);
    CHECK(big);
    memset(big, 1, 48 * MIB);
    free(big);
    cap(MIB);
    static void *blocks[200000];
    size_t n = 0;
    /* 24 MiB in all (as the blocks' usable sizes count it: a page for valloc's): more than the
     * chunks hold free, and than the cap leaves. */
    for (size_t total = 0; total < 24 * MIB; total += malloc_usable_size(blocks[n - 1])) {
        errno = EILSEQ;
        unsigned char *p = one(kind, size, small ? 64 : 64 * KIB);
        CHECK(p);
        CHECK(errno == EILSEQ);
        p[size - 1] = 1;
        CHECK(n < sizeof blocks / sizeof blocks[0]);
        blocks[n++] = p;
    }
    for (size_t i = 0; i < n; i++) free(blocks[i]);
    CHECK(errno == EILSEQ);
}

/* Maps a page at `at` that nothing else may take, or finds one there already. */
static void guard(void *at) {
    void *g = mmap(at, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK((g == at) || (g == MAP_FAILED && errno == EEXIST));
}

/* A freed 48 MiB huge block, which the allocator keeps, fills the capped address space: a
 * 64 MiB block (by the call `kind` picks) does not fit in it, nor can it extend it (a page is
 * mapped on each side of the block's run), so its mapping is refused once, gives the block
 * back, and is granted. */
static void huge_after_giving_back(int kind) {
    unsigned char *big = malloc(48 * MIB);
    CHECK(big);
    memset(big, 1, 48 * MIB);
    /* The block's run: its header page, then the block. */
    guard(big - 2 * 4096);
    guard(big + 48 * MIB);
    free(big);
    cap(28 * MIB);
    errno = EILSEQ;
    unsigned char *p = one(kind, 64 * MIB, 8 * MIB);
    CHECK(p);
    CHECK(errno == EILSEQ);
    p[64 * MIB - 1] = 1;
    free(p);
    CHECK(errno == EILSEQ);
}

/* Runs `f(arg)` in a child process; returns whether it exited 0. */
static int in_child(const char *name, void (*f)(int), int arg) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        f(arg);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%s %s\n", ok ? "ok" : "FAILED", name);
    return ok;
}

static void run_realloc_huge(int arg) {
    (void)arg;
    realloc_huge_grows();
}

static void run_realloc_medium(int arg) {
    (void)arg;
    realloc_medium_moves_to_huge();
}

int main(void) {
    int ok = in_child("realloc 300 -> 400 MiB", run_realloc_huge, 0);
    ok &= in_child("realloc 1 -> 1.1 MiB", run_realloc_medium, 0);
    char name[80];
    for (int k = 0; k < KINDS; k++) {
        snprintf(name, sizeof name, "%s of small blocks, a new chunk", kind_names[k]);
        ok &= in_child(name, chunk_after_giving_back, k);
        snprintf(name, sizeof name, "%s of page runs, a new chunk", kind_names[k]);
        ok &= in_child(name, chunk_after_giving_back, KINDS + k);
        snprintf(name, sizeof name, "%s of a huge block", kind_names[k]);
        ok &= in_child(name, huge_after_giving_back, k);
    }
    if (ok) puts("ok every successful call keeps errno");
    return ok ? 0 : 1;
}
