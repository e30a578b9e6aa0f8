/* A library preloaded after libspecalloc.so (tests/setup.rs): its constructor, which runs
 * before the allocator's, takes every pthread key the system has, and allocates nothing. */
#include <pthread.h>

__attribute__((constructor)) static void take_every_key(void) {
    pthread_key_t k;
    while (pthread_key_create(&k, NULL) == 0) {
    }
}
