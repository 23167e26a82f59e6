-- Threads on each CPU between sched_switch records, and the wakeups.
SELECT 'on_cpu' AS what, cpu, ts, dur, tid, comm, end_state, NULL AS target_cpu FROM golden.sched_slice
UNION ALL
SELECT 'waking', cpu, ts, NULL, tid, comm, NULL, target_cpu FROM golden.sched_waking
ORDER BY what, cpu, ts
