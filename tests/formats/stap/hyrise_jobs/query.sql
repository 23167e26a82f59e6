-- SystemTap printf lines of Hyrise-like jobs (seed 004): seven start/end pairs become job spans
-- (the reused task pointer closes the job that started on it last), one end before any start and
-- one start never ended stay as their halves.
SELECT 'job' AS type, ts, dur, task FROM golden.job
UNION ALL SELECT 'job_start', ts, NULL, task FROM golden.job_start
UNION ALL SELECT 'job_end', ts, NULL, task FROM golden.job_end
ORDER BY ts, type, task
