-- How `input` was made: DuckDB 2.0 wrote it (a Parquet writer nobody here wrote), from this table:
-- duckdb -c ".read tests/formats/parquet/duckdb/make.sql"
COPY (
  SELECT * FROM (VALUES
    (TIMESTAMP '2024-05-01 12:00:00',     'db-1', 'query', 12.5::DOUBLE, 120::BIGINT, true,  'SELECT 1'),
    (TIMESTAMP '2024-05-01 12:00:00.250', 'db-2', 'query', 3.75::DOUBLE, 7::BIGINT,   false, NULL),
    (TIMESTAMP '2024-05-01 12:00:01',     'db-1', 'flush', NULL,         4096::BIGINT, true, 'wal'),
    (TIMESTAMP '2024-05-01 12:00:01.5',   'db-1', 'query', 0.5::DOUBLE,  1::BIGINT,   true,  'SELECT 2'),
    (TIMESTAMP '2024-05-01 12:00:02',     'db-2', 'flush', 1.0::DOUBLE,  8192::BIGINT, false, 'wal')
  ) AS t(ts, host, kind, ms, n, ok, note)
) TO 'tests/formats/parquet/duckdb/input' (FORMAT parquet);
