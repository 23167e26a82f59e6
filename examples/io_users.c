/* A database-like IO workload for the replay walk-through (docs/replay.md):
   USERS threads, each a user who repeatedly reads 4 random 4 KiB pages of a shared data file,
   appends a 512-byte record to its own log, makes it durable (fdatasync) and thinks THINK_MS.
   DIR/data.db must exist (e.g. head -c 16M /dev/urandom > DIR/data.db): it is only read.
   Usage: io_users DIR [USERS=4] [SECONDS=5] [THINK_MS=20] */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int seconds = 5, think_ms = 20;
static long data_pages;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *user(void *arg) {
    long id = (long)arg;
    char path[4096], page[4096], rec[512];
    unsigned seed = 12345u + (unsigned)id;
    snprintf(path, sizeof path, "%s/data.db", dir);
    int data = open(path, O_RDONLY);
    snprintf(path, sizeof path, "%s/log-%ld.wal", dir, id);
    int log = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    memset(rec, 'a' + (int)id % 26, sizeof rec);
    struct timespec think = {think_ms / 1000, (think_ms % 1000) * 1000000L};
    double end = now() + seconds;
    while (now() < end) {
        for (int i = 0; i < 4; i++) pread(data, page, sizeof page, (off_t)(rand_r(&seed) % data_pages) * 4096);
        write(log, rec, sizeof rec);
        fdatasync(log);
        nanosleep(&think, 0);
    }
    close(log);
    close(data);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: io_users DIR [USERS] [SECONDS] [THINK_MS]\n");
        return 2;
    }
    dir = argv[1];
    int users = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3) seconds = atoi(argv[3]);
    if (argc > 4) think_ms = atoi(argv[4]);
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/data.db", dir);
    if (stat(path, &st) != 0 || st.st_size < 4096) {
        fprintf(stderr, "io_users: %s missing or smaller than 4 KiB\n", path);
        return 2;
    }
    data_pages = st.st_size / 4096;
    pthread_t t[256];
    if (users > 256) users = 256;
    if (users < 1) users = 1;
    for (long i = 0; i < users; i++) pthread_create(&t[i], 0, user, (void *)i);
    for (int i = 0; i < users; i++) pthread_join(t[i], 0);
    return 0;
}
