-- outbox.max_headers_bytes (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 022.
--
-- Largest headers object enqueue accepts (bytes of its JSON text), 8 KiB:
-- room for trace context (traceparent and a full tracestate are under
-- 600 bytes) and a few more, and the size HTTP servers commonly allow
-- for a request's header block.
CREATE OR REPLACE FUNCTION outbox.max_headers_bytes() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 8192';
