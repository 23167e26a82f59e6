-- bpftrace lhist(n, min, max, step) by plain SQL: the linear bucket of every value of an
-- integer column, counted per group (see hist_log2.sql): 0 below min, (max - min) / step + 1
-- at or above max, else (v - min) / step + 1. Values in ns divided by {unit} toward zero.
--
-- Output columns:
--   grp         VARCHAR  the group ('' ungrouped; '(none)' for NULL)
--   bucket      BIGINT   bpftrace's bucket index
--   count       BIGINT   values in the bucket
WITH vals AS (
    SELECT {group} AS grp,
           CASE WHEN {value} < 0 THEN -((-{value}) // {unit}) ELSE {value} // {unit} END AS v
    FROM {source}
    WHERE {value} IS NOT NULL AND {where}
)
SELECT grp,
       CASE WHEN v < {min} THEN 0 WHEN v >= {max} THEN {buckets} + 1 ELSE (v - {min}) // {step} + 1 END AS bucket,
       count(*) AS count
FROM vals
GROUP BY 1, 2
ORDER BY 1, 2
