-- Object state at time t by plain SQL: the last write at or before t of every field
-- of one object. The reference for `object_state()` (which answers from the objects
-- index) and the DuckDB baseline of `tracehouse bench analyze`.
--
-- Output columns:
--   field       BIGINT   the field
--   value       BIGINT   its value at t
--   ts          BIGINT   time of that write, ns
SELECT {field} AS field, arg_max({value}, ts) AS value, max(ts) AS ts
FROM {trace}.{type}
WHERE {object} = {obj} AND ts <= {t}
GROUP BY 1
ORDER BY 1
