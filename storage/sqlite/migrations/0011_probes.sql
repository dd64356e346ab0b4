-- Verification that asks (docs/api.md "Probes"): a holder that answers
-- probes declares its compaction interval (holders.probe_compact, added by
-- the migration's Go half: SQLite has no ADD COLUMN IF NOT EXISTS); each
-- probe shredd asks a holder about a forget's artifacts is a row of
-- probes, with its nonce, when the holder may see it (chosen at random,
-- so the holder cannot predict it), its deadline and the signed answer.
-- Owned by package erasure.
CREATE TABLE IF NOT EXISTS probes (
	id BLOB PRIMARY KEY,
	forget BLOB NOT NULL,
	holder TEXT NOT NULL,
	nonce BLOB NOT NULL,
	artifacts TEXT NOT NULL,
	markers TEXT NOT NULL DEFAULT '',
	acked_at INTEGER NOT NULL,
	compact INTEGER NOT NULL,
	visible_at INTEGER NOT NULL,
	deadline INTEGER NOT NULL,
	answered_at INTEGER,
	found TEXT,
	signature BLOB);
CREATE INDEX IF NOT EXISTS probes_by_forget ON probes(forget, holder, visible_at);
CREATE INDEX IF NOT EXISTS probes_open ON probes(holder, visible_at) WHERE answered_at IS NULL;
