-- See storage/sqlite/migrations/0003_list_indexes.sql.
CREATE INDEX forgets_by_requested ON forgets(requested_at, id);
CREATE INDEX holder_acks_by_holder ON holder_acks(holder, received_at);
