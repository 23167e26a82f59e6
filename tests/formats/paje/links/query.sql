-- PajeNG's links.trace: two links from p1, matched to their ends by key (myKey-001 ends in p2,
-- myKey-002 in p3); the end's container and time are on the start's row.
SELECT src.name AS src, l.ts, l.link_type, l.value, l.key, dst.name AS dst, l.dst_ts, l.dst_ts - l.ts AS took
FROM golden.link l
JOIN th.producers src ON src.trace = 'golden' AND src.id = l.producer
JOIN th.producers dst ON dst.trace = 'golden' AND dst.id = l.dst_producer
ORDER BY l.ts
