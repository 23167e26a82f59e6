-- Event density by plain SQL: events per equal time bin (and type, producer) of one
-- trace; bin b covers [start + ceil(b*(end-start)/bins), start + ceil((b+1)*(end-start)/bins)).
-- The reference for `density()` (which answers from the density index instead)
-- and the DuckDB baseline of `tracehouse bench analyze`.
--
-- Output columns:
--   bin         BIGINT   bin number, 0..bins-1; bin b covers [start + b*width, ...)
--   type        VARCHAR  event type
--   producer    INTEGER  producer id
--   events      BIGINT   events in that bin
SELECT ((ts - {start}) * {bins}) // ({end} - {start}) AS bin, type, producer, count(*) AS events
FROM {trace}.events
WHERE ts >= {start} AND ts < {end}
GROUP BY ALL
ORDER BY bin, type, producer
