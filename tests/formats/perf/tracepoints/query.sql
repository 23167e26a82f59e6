-- `perf record -e sched:sched_switch -e sched:sched_process_exit -g` of the same program: each
-- tracepoint hit a row of `tracepoint` with its fields as printed and its kernel-and-user stack
-- (the first 16 records and the exits of the capture).
SELECT ts, producer, seq, cpu, event, fields, leaf, depth, split_part(stack, ';', 1) AS root
FROM golden.tracepoint
ORDER BY ts, producer, seq
