-- Go's CPU profile of burn.go: stacks root first, cpu nanoseconds (the default sample type) and sample counts.
SELECT stack, leaf, labels, sum(value) AS cpu_ns, sum(count) AS samples, count(*) AS rows
FROM golden.sample GROUP BY ALL ORDER BY cpu_ns DESC, stack
