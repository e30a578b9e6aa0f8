/* specalloc for C and C++: what a program can call beyond the malloc family.
 *
 * Build the library with `cargo build --release -p specalloc-capi` (target/release/
 * libspecalloc.so, or libspecalloc.a), then either run a program on it with
 * LD_PRELOAD=target/release/libspecalloc.so, or link it (-lspecalloc). malloc, free, calloc,
 * realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and
 * malloc_usable_size are the standard ones (<stdlib.h>, <malloc.h>); C++'s new and delete reach
 * them through libstdc++.
 *
 * A program that may also run without specalloc can declare these functions weak and test them
 * for NULL before calling.
 */
#ifndef SPECALLOC_H
#define SPECALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The allocator's counters (a summary of specalloc::stats()). */
struct specalloc_stats {
    uint64_t bytes_in_use;   /* bytes in live objects, at their class size or pages */
    uint64_t bytes_mapped;   /* bytes mapped from the OS */
    uint64_t pages_in_use;   /* pages handed out by the page heap plus live huge mappings, bytes */
    uint64_t peak_in_use;    /* the highest pages_in_use so far */
    uint64_t allocs;         /* allocations so far */
    uint64_t frees;          /* frees so far */
    uint64_t live_objects;   /* objects live now */
    uint64_t large_objects;  /* large objects (over 32 KiB) live now */
    uint64_t remote_frees;   /* frees of blocks another thread's heap owned */
    uint64_t threads;        /* threads holding a heap now */
    uint64_t heaps;          /* heaps made so far (reused once their thread exits) */
    uint64_t chunks;         /* 4 MiB chunks of the page heap */
    uint64_t free_resident;  /* free pages still holding memory, bytes */
    uint64_t returned_to_os; /* bytes of free pages given back to the OS so far */
};

/* Fills *out, writing at most `size` bytes (pass sizeof *out); returns the bytes written.
 * Does not allocate. */
size_t specalloc_stats(struct specalloc_stats *out, size_t size);

/* Writes the statistics table (as specalloc::stats() prints it) to file descriptor `fd`;
 * 0 on success, -1 when the write failed. Allocates to format the table. */
int specalloc_stats_print(int fd);

/* Gives free memory back to the OS now: the calling thread's empty spans, the page heap's free
 * pages, the cache of freed huge mappings. Returns the bytes returned to the OS. */
size_t specalloc_collect(void);

/* Turns the background purge on (a thread that gives free pages back on time, every
 * `interval_ms` milliseconds, rather than only when the program uses the page heap) or off (0).
 * Also set by the environment variable SPECALLOC_BACKGROUND_PURGE_MS. Returns 0, or the error
 * number of the failed pthread_create (the purge then stays off). */
int specalloc_background_purge(uint64_t interval_ms);

#ifdef __cplusplus
}
#endif

#endif /* SPECALLOC_H */
