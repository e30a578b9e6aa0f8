/* `main` calls pthread_exit while a second thread allocates: the process ends when that thread
 * returns, with status 0, though the allocator's background trimmer was started by the second
 * thread. Prints "done" from the last thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg) {
    for (int i = 0; i < 10000; i++) free(malloc(100 + i % 200));
    usleep(300 * 1000); /* past a few of the trimmer's wakes */
    printf("done\n");
    fflush(stdout);
    return arg;
}

int main(void) {
    free(malloc(10));
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    pthread_detach(t);
    pthread_exit(NULL);
}
