-- Counts and durations per producer (thread, CPU, node ...) of one trace, time range [start, end).
--
-- Output columns:
--   trace       VARCHAR  the trace's name
--   producer    INTEGER  producer id (th.producers.id)
--   name        VARCHAR  producer name
--   events      BIGINT   events it emitted in the range
--   spans       BIGINT   of them, events with a duration (span kind)
--   total_dur   BIGINT   sum of their durations, ns
--   mean_dur    DOUBLE   mean duration, ns
--   first_ts    BIGINT   first event time, ns
--   last_ts     BIGINT   last event time, ns
SELECT {trace_str} AS trace, e.producer, min(p.name) AS name, count(*) AS events, count(e.dur) AS spans,
       CAST(sum(e.dur) AS BIGINT) AS total_dur, avg(e.dur) AS mean_dur, min(e.ts) AS first_ts, max(e.ts) AS last_ts
FROM {trace}.events e
LEFT JOIN th.producers p ON p.trace = {trace_str} AND p.id = e.producer
WHERE {where}
GROUP BY e.producer
ORDER BY events DESC, e.producer
