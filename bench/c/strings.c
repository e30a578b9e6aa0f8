/* String building: words formatted with snprintf into fresh buffers, duplicated, concatenated
 * into lines grown with realloc, and kept in a chained hash table that is rebuilt each pass. */
#include <string.h>
#include "common.h"

#define BUCKETS 65536

struct entry {
    char *key;
    char *line;
    struct entry *next;
};

static unsigned hash(const char *s) {
    unsigned h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

int main(int argc, char **argv) {
    long passes = 3 * scale(argc, argv);
    uint64_t x = 7, total = 0;
    for (long pass = 0; pass < passes; pass++) {
        struct entry **table = calloc(BUCKETS, sizeof *table);
        DIE_IF(!table);
        for (int i = 0; i < 150000; i++) {
            char word[64];
            snprintf(word, sizeof word, "w%llx-%d", (unsigned long long)(rng_next(&x) % 100000), i % 7);
            unsigned b = hash(word) % BUCKETS;
            struct entry *e = table[b];
            while (e && strcmp(e->key, word) != 0) e = e->next;
            if (!e) {
                e = malloc(sizeof *e);
                DIE_IF(!e);
                e->key = strdup(word);
                e->line = strdup("");
                DIE_IF(!e->key || !e->line);
                e->next = table[b];
                table[b] = e;
            }
            size_t old = strlen(e->line), add = strlen(word) + 1;
            e->line = realloc(e->line, old + add + 1);
            DIE_IF(!e->line);
            memcpy(e->line + old, word, add - 1);
            e->line[old + add - 1] = ' ';
            e->line[old + add] = 0;
        }
        for (unsigned b = 0; b < BUCKETS; b++) {
            struct entry *e = table[b];
            while (e) {
                struct entry *n = e->next;
                total += strlen(e->line);
                free(e->key);
                free(e->line);
                free(e);
                e = n;
            }
        }
        free(table);
    }
    printf("strings %ld passes bytes %llu\n", passes, (unsigned long long)total);
    return 0;
}
