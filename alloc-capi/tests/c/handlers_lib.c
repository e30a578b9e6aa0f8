/* A library preloaded after libspecalloc.so (tests/setup.rs): its constructor, which runs
 * before the allocator's, registers 60 fork handlers and allocates nothing itself (a hang is caught by its alarm): glibc grows
 * its array of handlers with malloc (past 48), so the process's first malloc is made from
 * inside pthread_atfork, before the allocator's constructor has run. */
#include <pthread.h>
#include <unistd.h>

static void nothing(void) {}

__attribute__((constructor)) static void register_handlers(void) {
    /* A process that hangs here (before main and its own alarm) dies. */
    alarm(60);
    for (int i = 0; i < 60; i++) {
        if (pthread_atfork(nothing, nothing, nothing) != 0) _exit(3);
    }
}
