-- `perf script -F +pid` prints PID/TID: each thread is a producer under its process (the first
-- 30 records of the same capture as `threads`). Timestamps are exact nanoseconds of perf's
-- seconds.microseconds.
SELECT p.id, p.kind, p.name, p.parent, p.attrs, count(s.ts) AS samples, min(s.ts) AS first_ts,
       min(s.leaf) AS a_leaf, min(s.dso) AS a_dso
FROM th.producers p LEFT JOIN golden.sample s ON s.producer = p.id
WHERE p.trace = 'golden'
GROUP BY ALL
ORDER BY p.id
