SELECT s.ts - (SELECT min(ts) FROM golden.span) AS t, s.dur, p.kind AS producer_kind, p.name AS producer, s.trace_id,
       s.span_id, s.parent_span_id, s.name, s.kind, s.status, s.service, s.scope, s.attributes, s.events, s.links
FROM golden.span s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
UNION ALL
SELECT l.ts - (SELECT min(ts) FROM golden.span), NULL, 'link', NULL, l.linked_trace_id, l.span_id, l.linked_span_id,
       NULL, NULL, NULL, NULL, NULL, l.attributes, NULL, NULL
FROM golden.span_link l
ORDER BY 1, 3 DESC, 8, 6
