SELECT 'span' AS what, s.ts, s.dur, p.kind AS producer_kind, p.name AS producer, s.span_id, s.parent_span_id, s.name,
       s.kind, s.status, s.status_message, s.service, s.scope, s.http_method, s.http_status_code, s.attributes
FROM golden.span s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
UNION ALL
SELECT 'log', l.ts, l.severity, p.kind, p.name, l.span_id, l.trace_id, l.body, l.severity_text, NULL, NULL, l.service,
       l.scope, NULL, NULL, l.attributes
FROM golden.log l JOIN th.producers p ON p.trace = 'golden' AND p.id = l.producer
ORDER BY 2
