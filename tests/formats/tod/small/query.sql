-- 200 TOD events on 2 threads (seed 7): per type and thread the events, and the seq and ts range.
-- Every behavior_enter has its behavior_exit (the generator exits open frames at the end).
SELECT type, producer, count(*) AS events, min(seq) AS first_seq, max(seq) AS last_seq
FROM golden.events
GROUP BY type, producer
ORDER BY type, producer
