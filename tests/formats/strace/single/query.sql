-- io_single.c (tests/data/strace/io_single.c) after the dynamic loader: each call as a replayer reads it.
-- pos is the tracked file position for read/write (shared by the dup'ed fd 4), explicit for pread/pwrite.
SELECT seq, name, fd, path, path2, pos, size, ret, errno, flags, dur
FROM golden.syscall
WHERE seq >= (SELECT min(seq) FROM golden.syscall WHERE path = '/tmp/th/data.bin')
ORDER BY seq
