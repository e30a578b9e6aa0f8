/* A library that allocates, for dlopen.c: in its constructor, in a function the program calls,
 * in a thread-local of its own (glibc mallocs the TLS block of a dlopen'd library), and frees
 * in its destructor. */
#include <stdlib.h>
#include <string.h>

static char *kept;
static __thread char tls_buf[4096];

__attribute__((constructor)) static void on_load(void) {
    kept = malloc(1000);
    if (kept) memset(kept, 'k', 1000);
}

__attribute__((destructor)) static void on_unload(void) { free(kept); }

/* A fresh string the caller frees; touches this thread's TLS block. */
char *dlib_make(int n) {
    tls_buf[n % 4096] = (char)n;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    memset(s, 'a' + n % 26, (size_t)n);
    s[n] = 0;
    return kept && kept[999] == 'k' && tls_buf[n % 4096] == (char)n ? s : NULL;
}
