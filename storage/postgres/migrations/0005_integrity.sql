-- Integrity (docs/operations.md, "What each file is for"): the
-- fingerprints of the secrets the data depends on, pinned at the first start
-- that knows them, so that a start with a missing or different secret next
-- to this database is refused instead of silently making a new one.
CREATE TABLE IF NOT EXISTS secrets (
	name TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	pinned_at BIGINT NOT NULL);
-- Why a forget stays where it is: a fact its next state asserts was read
-- back and found untrue (keystore.ErrReadBack). NULL once it moves on.
ALTER TABLE forgets ADD COLUMN IF NOT EXISTS stall_reason TEXT;
-- The forget's commitment salt, sealed under a key derived from the subject
-- secret and the raw subject id: a repeated forget (an answer lost on the
-- way) hands its caller the salt again, and the database alone reveals
-- nothing of it.
ALTER TABLE forgets ADD COLUMN IF NOT EXISTS salt_sealed BYTEA;
