/* The Benchmarks Game's binary-trees: build, check and free many perfect binary trees, and keep
 * one long-lived tree throughout. */
#include "common.h"

struct node {
    struct node *l, *r;
};

static struct node *make(int d) {
    struct node *n = malloc(sizeof *n);
    DIE_IF(!n);
    if (d > 0) {
        n->l = make(d - 1);
        n->r = make(d - 1);
    } else {
        n->l = n->r = NULL;
    }
    return n;
}

static long check(const struct node *n) { return 1 + (n->l ? check(n->l) + check(n->r) : 0); }

static void drop(struct node *n) {
    if (n->l) {
        drop(n->l);
        drop(n->r);
    }
    free(n);
}

int main(int argc, char **argv) {
    int max = 15 + (int)scale(argc, argv);
    struct node *longlived = make(max);
    long total = 0;
    for (int d = 4; d <= max; d += 2) {
        long iters = 1L << (max - d + 4);
        for (long i = 0; i < iters; i++) {
            struct node *t = make(d);
            total += check(t);
            drop(t);
        }
    }
    total += check(longlived);
    drop(longlived);
    printf("bintree depth %d nodes checked %ld\n", max, total);
    return 0;
}
