-- The pages of GET /v1/forgets (newest first: requested_at, id) and the
-- last ack of each holder in GET /v1/holders, without sorting or scanning
-- whole tables.
CREATE INDEX IF NOT EXISTS forgets_by_requested ON forgets(requested_at, id);
CREATE INDEX IF NOT EXISTS holder_acks_by_holder ON holder_acks(holder, received_at);
