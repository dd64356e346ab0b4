-- See storage/sqlite/migrations/0008_background_indexes.sql.
CREATE INDEX forgets_by_state_rekeyed ON forgets(state, rekeyed_at);
CREATE INDEX forgets_by_state_marker ON forgets(state, rekey_marker);
CREATE INDEX buckets_by_root_version ON buckets(root_version);
