/* A multithreaded IO workload for the strace tests: THREADS threads each write, sync,
   read back and close their own file. Usage: io_threads DIR */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define WRITES 10
#define BLOCK 4096
#define READ 1000

static const char *dir;

static void *work(void *arg) {
    char path[4096], buf[BLOCK];
    snprintf(path, sizeof path, "%s/out-%ld.dat", dir, (long)arg);
    memset(buf, 'a' + (int)(long)arg, sizeof buf);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < WRITES; i++) write(fd, buf, BLOCK);
    fsync(fd);
    close(fd);
    fd = open(path, O_RDONLY);
    while (read(fd, buf, READ) > 0) {}   /* 40960 bytes: 41 reads with data, 1 at EOF */
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    pthread_t t[THREADS];
    if (argc < 2) return 2;
    dir = argv[1];
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], 0);
    return 0;
}
