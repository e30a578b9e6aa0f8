/* Large buffers replaced at random (the pattern of mimalloc-bench's malloc-large): 20 live
 * buffers of 5 to 25 MiB, each replacement allocated and cleared before the buffer it replaces
 * is freed (as `buffers[i] = std::make_unique<char[]>(n)` does), 2,000 replacements. */
#include <string.h>
#include "common.h"

#define NBUF 20
#define MIB (1024 * 1024)

int main(int argc, char **argv) {
    long rounds = (long)(2000 * scale(argc, argv));
    uint64_t x = 42, sum = 0;
    unsigned char *buf[NBUF] = {0};
    size_t len[NBUF] = {0};
    for (long r = 0; r < rounds; r++) {
        int i = (int)(rng_next(&x) % NBUF);
        size_t n = 5 * MIB + rng_next(&x) % (20 * MIB);
        unsigned char *p = malloc(n);
        DIE_IF(!p);
        memset(p, (int)(r & 0xff), n);
        if (buf[i]) sum += buf[i][len[i] / 2] + len[i];
        free(buf[i]);
        buf[i] = p;
        len[i] = n;
    }
    for (int i = 0; i < NBUF; i++) {
        if (buf[i]) sum += buf[i][len[i] - 1];
        free(buf[i]);
    }
    printf("largebuf %ld replacements checksum %llu\n", rounds, (unsigned long long)sum);
    return 0;
}
