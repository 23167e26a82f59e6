-- PajeNG's variables.trace: p1's VAR set to 10, then 3 added and 2 subtracted; each row the
-- value from ts on, after the operation.
SELECT p.name AS container, v.variable_type, v.ts, v.op, v.operand, v.value
FROM golden.variable v JOIN th.producers p ON p.trace = 'golden' AND p.id = v.producer
ORDER BY v.ts
