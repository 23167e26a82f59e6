-- io_threads.c (tests/data/strace/io_threads.c) under strace -f: 4 threads of one process, each
-- writes 10 x 4096 bytes to its own file, fsyncs, then reads it back 1000 bytes at a time (41
-- reads with data, 1 at EOF). Per file: the thread, its process, and what moved.
SELECT s.path, p.kind, p.attrs->>'tid' AS tid, parent.kind AS parent_kind, parent.attrs->>'pid' AS pid,
       count(*) FILTER (WHERE s.name = 'write') AS writes,
       sum(s.ret) FILTER (WHERE s.name = 'write') AS written,
       max(s.pos + s.ret) FILTER (WHERE s.name = 'write') AS write_end,
       count(*) FILTER (WHERE s.name = 'read') AS reads,
       sum(s.ret) FILTER (WHERE s.name = 'read') AS read_bytes,
       count(*) FILTER (WHERE s.name = 'fsync') AS fsyncs,
       count(*) FILTER (WHERE s.name IN ('open', 'openat')) AS opens
FROM golden.syscall s
JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
LEFT JOIN th.producers parent ON parent.trace = 'golden' AND parent.id = p.parent
WHERE s.path LIKE '%/out-%.dat'
GROUP BY ALL
ORDER BY s.path
