-- Slices (paired begin/end per track), instants and counters of the builder's trace, with their track.
SELECT 'slice' AS type, p.name AS track, s.ts, s.dur, s.name, s.category, s.args, NULL AS value
FROM golden.slice s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
UNION ALL
SELECT 'instant', p.name, i.ts, NULL, i.name, i.category, i.args, NULL
FROM golden.instant i JOIN th.producers p ON p.trace = 'golden' AND p.id = i.producer
UNION ALL
SELECT 'counter', p.name, c.ts, NULL, c.name, NULL, NULL, c.value
FROM golden.counter c JOIN th.producers p ON p.trace = 'golden' AND p.id = c.producer
ORDER BY type, track, ts
