-- A CSV of B/E records: one event type per value of --type (B, E), ts from microseconds, the
-- other columns typed parameters.
SELECT 'B' AS ph, ts, producer, seq, name, cat FROM golden."B"
UNION ALL SELECT 'E', ts, producer, seq, name, cat FROM golden."E"
ORDER BY ts, ph
