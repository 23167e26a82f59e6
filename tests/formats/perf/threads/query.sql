-- `perf record -F 499 -g --sample-cpu` of a C program (tests/formats/perf/burn.c: main and one
-- thread calling leaf_mul/leaf_div from compute), then `perf script`: every sample a row of
-- `sample`, its stack root first in folded form, weighed by its period (ns of cpu-clock). The
-- flame graph is this GROUP BY; threads are producers named by their command.
SELECT s.producer, p.name AS thread, p.kind, s.stack, count(*) AS samples, sum(s.period) AS period_ns,
       min(s.depth) AS depth, count(DISTINCT s.cpu) AS cpus, min(s.event) AS event
FROM golden.sample s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
GROUP BY ALL
ORDER BY s.producer, samples DESC, s.stack
