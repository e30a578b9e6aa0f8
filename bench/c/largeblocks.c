/* Large blocks: one thread keeps a working set of 32 blocks of 64 KiB to 4 MiB (as many sizes
 * in each doubling) and replaces a random one at a time, writing one byte in each 4 KiB page of
 * the new block's first quarter and its last byte, as programs that reserve a buffer and fill
 * part of it do. It measures what large allocations cost: mappings, page faults, and the memory
 * an allocator keeps (peak RSS). 100,000 replacements at scale 1. */
#include "common.h"

#define SLOTS 32
#define PAGE 4096

int main(int argc, char **argv) {
    long ops = (long)(100000 * scale(argc, argv));
    static unsigned char *slot[SLOTS];
    static size_t len[SLOTS];
    uint64_t x = 17, sum = 0;
    for (long i = 0; i < ops; i++) {
        uint64_t r = rng_next(&x);
        size_t k = (r >> 40) % SLOTS;
        size_t base = (size_t)64 << 10 << (r % 6);
        size_t n = base + (r >> 8) % base;
        if (slot[k]) {
            unsigned char *b = slot[k];
            for (size_t p = 0; p < len[k] / 4; p += PAGE) sum += b[p];
            sum += b[len[k] - 1];
            free(b);
        }
        unsigned char *b = malloc(n);
        DIE_IF(!b);
        for (size_t p = 0; p < n / 4; p += PAGE) b[p] = (unsigned char)(i + p / PAGE);
        b[n - 1] = (unsigned char)n;
        slot[k] = b;
        len[k] = n;
    }
    for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
    report("largeblocks", 1, ops, "allocations", sum);
    return 0;
}
