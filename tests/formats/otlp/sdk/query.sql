SELECT s.ts - 1700000000000000000 AS t, s.dur, p.kind AS producer_kind, p.name AS producer, s.span_id,
       s.parent_span_id, s.name, s.kind, s.status, s.status_message, s.service, s.scope, s.http_method,
       s.http_status_code, s.url_full, s.server_address, s.db_system, s.db_statement, s.rpc_system,
       s.rpc_service, s.rpc_method, s.messaging_system, s.messaging_destination, s.attributes, s.events, s.links
FROM golden.span s JOIN th.producers p ON p.trace = 'golden' AND p.id = s.producer
UNION ALL
SELECT e.ts - 1700000000000000000, NULL, 'event', NULL, e.span_id, NULL, e.name, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, e.attributes, NULL, NULL
FROM golden.span_event e
UNION ALL
SELECT l.ts - 1700000000000000000, NULL, 'link', l.linked_trace_id, l.span_id, l.linked_span_id, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, l.attributes, NULL, NULL
FROM golden.span_link l
ORDER BY 1, 3
