-- A Parquet file written by DuckDB (make.sql): TIMESTAMP ts as epoch ns, host names interned as
-- producers, one event type per kind, the other columns typed parameters (nulls kept).
SELECT 'query' AS kind, e.ts, p.name AS host, e.seq, e.ms, e.n, e.ok, e.note
FROM golden.query e JOIN th.producers p ON p.trace = 'golden' AND p.id = e.producer
UNION ALL
SELECT 'flush', e.ts, p.name, e.seq, e.ms, e.n, e.ok, e.note
FROM golden.flush e JOIN th.producers p ON p.trace = 'golden' AND p.id = e.producer
ORDER BY ts, host
