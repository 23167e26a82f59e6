/* A tiny job scheduler: 4 threads run 25 jobs each; job_start/job_end mark each job
   (the probes Hyrise's scheduler has, seed 004), traced with bpftrace uprobes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void job_start(void *task) { __asm__ volatile("" ::"r"(task) : "memory"); }
__attribute__((noinline)) void job_end(void *task) { __asm__ volatile("" ::"r"(task) : "memory"); }

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 25; i++) {
        void *task = malloc(64);
        job_start(task);
        struct timespec ts = {0, 20000L * (1 + (i + id) % 7)};
        nanosleep(&ts, NULL);
        job_end(task);
        free(task);
    }
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    /* bpftrace -c stops when this process exits: on a loaded machine the last job_end could
       still be in its buffers then (docs/formats/bpftrace.md). */
    struct timespec pause = {0, 100000000L};
    nanosleep(&pause, NULL);
    return 0;
}
