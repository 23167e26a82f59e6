-- Counts and durations per event type of one trace, time range [start, end).
--
-- Output columns:
--   trace       VARCHAR  the trace's name
--   type        VARCHAR  event type
--   events      BIGINT   events of that type in the range
--   spans       BIGINT   of them, events with a duration (span kind)
--   total_dur   BIGINT   sum of their durations, ns (NULL without spans)
--   mean_dur    DOUBLE   mean duration, ns
--   first_ts    BIGINT   first event time, ns
--   last_ts     BIGINT   last event time, ns
SELECT {trace_str} AS trace, type, count(*) AS events, count(dur) AS spans,
       CAST(sum(dur) AS BIGINT) AS total_dur, avg(dur) AS mean_dur, min(ts) AS first_ts, max(ts) AS last_ts
FROM {trace}.events
WHERE {where}
GROUP BY type
ORDER BY events DESC, type
