-- Integrity (docs/operations.md, "What each file is for"): the
-- fingerprints of the secrets the data depends on, pinned at the first start
-- that knows them, so that a start with a missing or different secret next
-- to this database is refused instead of silently making a new one.
CREATE TABLE IF NOT EXISTS secrets (
	name TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	pinned_at INTEGER NOT NULL);
-- The forgets' stall_reason (why a read-back keeps a forget where it is)
-- and salt_sealed (its commitment salt, sealed under a key derived from
-- the subject secret and the raw subject id, so that a repeated forget
-- hands its caller the salt again) are added by the Go half of this
-- migration (integrityColumns), where missing.
