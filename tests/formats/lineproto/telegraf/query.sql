-- Line protocol as Telegraf writes it (a bucket written over HTTP goes through the same ingest):
-- each tag set a producer, each measurement an event type typed by its fields (42i an integer,
-- 42 a float, true a bool, "x" a string). One row per field written.
WITH f AS (
    SELECT 'cpu' AS measurement, ts, producer, 'usage_user' AS field, typeof(usage_user) AS type, usage_user::VARCHAR AS value FROM golden.cpu
    UNION ALL SELECT 'cpu', ts, producer, 'usage_idle', typeof(usage_idle), usage_idle::VARCHAR FROM golden.cpu
    UNION ALL SELECT 'mem', ts, producer, 'used', typeof(used), used::VARCHAR FROM golden.mem
    UNION ALL SELECT 'mem', ts, producer, 'available_percent', typeof(available_percent), available_percent::VARCHAR FROM golden.mem
    UNION ALL SELECT 'mem', ts, producer, 'swap_on', typeof(swap_on), swap_on::VARCHAR FROM golden.mem
    UNION ALL SELECT 'disk', ts, producer, 'used', typeof(used), used::VARCHAR FROM golden.disk
    UNION ALL SELECT 'disk', ts, producer, 'fstype', typeof(fstype), fstype FROM golden.disk
)
SELECT f.measurement, f.ts, p.name AS tags, f.field, f.type, f.value
FROM f JOIN th.producers p ON p.trace = 'golden' AND p.id = f.producer
ORDER BY f.ts, f.measurement, tags, f.field
