-- Per group: how many values, their range and mean, and how many are below a threshold
-- (seed 004's "28.9% of jobs under 10 us"), for histograms answered by SQL (hist_log2.sql).
--
-- Output columns:
--   grp         VARCHAR  the group ('' ungrouped; '(none)' for NULL)
--   count       BIGINT   values
--   min         BIGINT   smallest, ns
--   max         BIGINT   largest, ns
--   mean        DOUBLE   mean, ns
--   below       BIGINT   values < {below} ns
SELECT {group} AS grp, count(*) AS count, min({value}) AS min, max({value}) AS max, avg({value}) AS mean,
       CAST(sum(CASE WHEN {value} < {below} THEN 1 ELSE 0 END) AS BIGINT) AS below
FROM {source}
WHERE {value} IS NOT NULL AND {where}
GROUP BY 1
ORDER BY 1
