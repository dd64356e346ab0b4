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
-- Both tables as one, for the readers by subject that must not wait for a
-- settle (a forget's verification, the holders' purge work): a subject's
-- staged rows are found by a scan of the staging table, which the
-- background settle keeps to about a second of registrations.
CREATE VIEW lineage_all AS
	SELECT sid, artifact, gen, direct FROM lineage
	UNION ALL SELECT sid, artifact, gen, direct FROM lineage_staged;
