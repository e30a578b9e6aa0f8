/* Mixed-size churn: one thread replaces random blocks of a 50,000-slot working set with new
 * blocks of mostly small, some medium and a few large sizes (as a long-running C program's heap
 * sees them), touching each block. */
#include <string.h>
#include "common.h"

#define SLOTS 50000

int main(int argc, char **argv) {
    long ops = 3000000 * scale(argc, argv);
    static unsigned char *slot[SLOTS];
    static size_t len[SLOTS];
    uint64_t x = 21, sum = 0;
    for (long i = 0; i < ops; i++) {
        uint64_t r = rng_next(&x);
        size_t k = r % SLOTS;
        uint64_t p = (r >> 20) % 1000;
        size_t n = p < 700 ? 8 + (r >> 32) % 120 : p < 970 ? 128 + (r >> 32) % 2000
                 : p < 998 ? 2048 + (r >> 32) % 30000 : 32768 + (r >> 32) % 200000;
        replace_slot(slot, len, k, n, (unsigned char)i, &sum);
    }
    for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
    printf("churn %ld ops checksum %llu\n", ops, (unsigned long long)sum);
    return 0;
}
