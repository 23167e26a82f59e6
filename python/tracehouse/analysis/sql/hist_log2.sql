-- bpftrace hist(n, k) by plain SQL: the log2 bucket of every value of an integer column,
-- counted per group; the reference for `histogram()` (Rust, src/analysis/hist.rs) and the way a
-- histogram is answered by an engine without our Rust core (Spark). Values are in ns,
-- divided by {unit} toward zero first (bpftrace's integer division).
-- Bucket of v: 0 when v < 0; v + 1 when v < 2^(k+1); else with p = floor(log2 v) (exact:
-- the float log2 is corrected by integer comparisons), ((p - k + 1) << k) + the 2^k-th of
-- the power of two v falls in, + 1.
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
), approx AS (
    SELECT grp, v, CASE WHEN v >= {small} THEN CAST(floor(log2(v)) AS BIGINT) END AS f FROM vals
), exact AS (
    SELECT grp, v, f - CASE WHEN v < CAST(pow(2, f) AS BIGINT) THEN 1 ELSE 0 END
                     + CASE WHEN f < 62 AND v >= CAST(pow(2, f + 1) AS BIGINT) THEN 1 ELSE 0 END AS p
    FROM approx
)
SELECT grp,
       CASE WHEN v < 0 THEN 0
            WHEN v < {small} THEN v + 1
            ELSE (p - {k} + 1) * {n} + (v - CAST(pow(2, p) AS BIGINT)) // CAST(pow(2, p - {k}) AS BIGINT) + 1
       END AS bucket,
       count(*) AS count
FROM exact
GROUP BY 1, 2
ORDER BY 1, 2
