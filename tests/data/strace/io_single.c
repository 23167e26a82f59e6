/* A single-threaded IO workload for the strace tests: every call below is asserted
   (count, fd, path, offset, size, result) by tests/test_strace.py. Usage: io_single DIR */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char path[4096], path2[4096], buf[8192];
    if (argc < 2) return 2;
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    snprintf(path2, sizeof path2, "%s/data.old", argv[1]);
    memset(buf, 'x', sizeof buf);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);  /* openat -> 3 */
    for (int i = 0; i < 8; i++) write(fd, buf, 4096);      /* offsets 0, 4096, ..., 28672 */
    fdatasync(fd);
    lseek(fd, 1000, SEEK_SET);
    read(fd, buf, 500);                                     /* offset 1000 */
    pread(fd, buf, 100, 20000);                             /* pread64 at 20000 */
    pwrite(fd, buf, 10, 32768);                             /* pwrite64 at 32768 */
    int fd2 = dup(fd);                                      /* 4, shares the position */
    write(fd2, buf, 24);                                    /* offset 1500 */
    close(fd2);
    fsync(fd);
    close(fd);
    open("/nonexistent/tracehouse", O_RDONLY);              /* -1 ENOENT */
    rename(path, path2);
    unlink(path2);
    return 0;
}
