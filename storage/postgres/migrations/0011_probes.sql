-- See storage/sqlite/migrations/0011_probes.sql.
ALTER TABLE holders ADD COLUMN probe_compact BIGINT;
CREATE TABLE probes (
	id BYTEA PRIMARY KEY,
	forget BYTEA NOT NULL,
	holder TEXT NOT NULL,
	nonce BYTEA NOT NULL,
	artifacts TEXT NOT NULL,
	markers TEXT NOT NULL DEFAULT '',
	acked_at BIGINT NOT NULL,
	compact BIGINT NOT NULL,
	visible_at BIGINT NOT NULL,
	deadline BIGINT NOT NULL,
	answered_at BIGINT,
	found TEXT,
	signature BYTEA);
CREATE INDEX probes_by_forget ON probes(forget, holder, visible_at);
CREATE INDEX probes_open ON probes(holder, visible_at) WHERE answered_at IS NULL;
