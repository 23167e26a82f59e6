-- Time spent per state: spans grouped by a state column (the span name for paired
-- spans, e.g. the method; any column of a span-kind type), time range [start, end)
-- on the span start.
--
-- Output columns:
--   trace       VARCHAR  the (source) trace's name
--   state       VARCHAR  the state (value of the state column, as text)
--   spans       BIGINT   spans in that state
--   total_dur   BIGINT   sum of their durations, ns
--   mean_dur    DOUBLE   mean duration, ns
--   self_dur    BIGINT   sum of their self times, ns (NULL when the source has none)
--   share       DOUBLE   total_dur / the sum of total_dur over all states
--   max_dur     BIGINT   the longest of them, ns
SELECT {trace_str} AS trace, CAST({state} AS VARCHAR) AS state, count(*) AS spans,
       CAST(sum(dur) AS BIGINT) AS total_dur, avg(dur) AS mean_dur, CAST(sum({self_col}) AS BIGINT) AS self_dur,
       sum(dur) / sum(sum(dur)) OVER () AS share, max(dur) AS max_dur
FROM {source}
WHERE {where}
GROUP BY 2
ORDER BY total_dur DESC NULLS LAST, state
