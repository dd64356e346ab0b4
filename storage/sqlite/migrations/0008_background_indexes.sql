-- The background work's reads without scanning every forget waiting for
-- an epoch (erasure: the forgets to re-key, state and rekeyed_at IS NULL;
-- the forgets an epoch completed after, state and rekey_marker below the
-- last epoch), and the newest root version of the bucket keys that every
-- forget group's ledger lines record (max(root_version)), without reading
-- every bucket.
CREATE INDEX IF NOT EXISTS forgets_by_state_rekeyed ON forgets(state, rekeyed_at);
CREATE INDEX IF NOT EXISTS forgets_by_state_marker ON forgets(state, rekey_marker);
CREATE INDEX IF NOT EXISTS buckets_by_root_version ON buckets(root_version);
