/* CHECK(c), shared by the C test programs: on a failed condition, prints the file, the line and
 * the condition to stderr and exits with status 1 (with _exit, which runs no atexit handler and
 * flushes nothing, where CHECK_EXIT is defined as _exit before this header). */
#ifndef SPECALLOC_TEST_CHECK_H
#define SPECALLOC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef CHECK_EXIT
#define CHECK_EXIT exit
#endif

#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c);                     \
            CHECK_EXIT(1);                                                                    \
        }                                                                                     \
    } while (0)

#endif
