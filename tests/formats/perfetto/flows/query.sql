-- Flow arrows of the builder's flows trace: from one step (a slice's start or an instant) to the next, with their threads.
SELECT f.id, p.name AS src_thread, f.ts AS src_ts, f.src_phase, q.name AS dst_thread, f.dst_ts, f.dst_phase, f.bp
FROM golden.flow f JOIN th.producers p ON p.trace = 'golden' AND p.id = f.producer
JOIN th.producers q ON q.trace = 'golden' AND q.id = f.dst_producer
ORDER BY f.ts, f.id
