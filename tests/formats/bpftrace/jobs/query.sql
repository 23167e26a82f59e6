-- bpftrace uprobes on jobs.c (4 threads x 25 jobs): every job_start paired with its job_end by
-- task pointer; per thread the jobs, and their total and extreme durations in ns.
SELECT p.attrs->>'tid' AS tid, count(*) AS jobs, min(dur) AS min_dur, max(dur) AS max_dur, sum(dur) AS total_dur
FROM golden.job j JOIN th.producers p ON p.trace = 'golden' AND p.id = j.producer
GROUP BY tid
ORDER BY tid
