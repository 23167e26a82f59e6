-- PajeNG's states.trace: p1 set to Inicio, Meio and Fim pushed and popped over it, p1 destroyed
-- at 1.34 s (which closes Inicio). Times in the file are seconds; stored times are ns.
SELECT p.name AS container, p.kind, s.state_type, s.value, s.ts, s.dur, s.depth
FROM golden.state s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
ORDER BY s.ts, s.depth
