-- See storage/sqlite/migrations/0004_staged_lineage.sql.
CREATE TABLE lineage_staged (
	artifact BYTEA NOT NULL,
	sid BYTEA NOT NULL,
	gen BIGINT NOT NULL,
	direct BOOLEAN NOT NULL,
	PRIMARY KEY (artifact, sid));
CREATE TABLE parents_staged (
	artifact BYTEA NOT NULL,
	parent BYTEA NOT NULL,
	PRIMARY KEY (artifact, parent));
