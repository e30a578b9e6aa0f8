/* A realloc-heavy buffer: 64 buffers grown by small appends to random lengths up to 2 MiB (as
 * readers of unknown-length input do), shrunk to fit, then freed, over and over. */
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
    long rounds = 40 * scale(argc, argv);
    uint64_t x = 99, sum = 0;
    for (long r = 0; r < rounds; r++) {
        unsigned char *buf[64];
        size_t len[64];
        for (int b = 0; b < 64; b++) {
            size_t target = 64 + rng_next(&x) % ((b % 8 == 0) ? (2 << 20) : (64 << 10));
            size_t n = 0, cap = 0;
            unsigned char *p = NULL;
            while (n < target) {
                size_t add = 1 + rng_next(&x) % 200;
                if (n + add > cap) {
                    cap = n + add;
                    p = realloc(p, cap);
                    DIE_IF(!p);
                }
                memset(p + n, (int)(add & 0xff), add);
                n += add;
            }
            p = realloc(p, n);
            DIE_IF(!p);
            buf[b] = p;
            len[b] = n;
        }
        for (int b = 0; b < 64; b++) {
            sum += buf[b][len[b] - 1] + len[b];
            free(buf[b]);
        }
    }
    printf("reallocbuf %ld rounds checksum %llu\n", rounds, (unsigned long long)sum);
    return 0;
}
