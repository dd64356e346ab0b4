-- Registrations append an artifact's lineage and parent rows here, keyed by
-- artifact id (time-ordered), so that a group commit writes a few pages at
-- the end of each table instead of one page per subject in lineage (keyed
-- by subject) and per parent in parents_by_parent. Package sealing moves
-- them into lineage and artifact_parents in the background, a chunk of
-- whole artifacts per transaction (sealing.Service.Settle), and before the
-- queries by subject or by parent that read lineage itself (lists, preview,
-- attestation). Readers by artifact read both tables in one statement.
CREATE TABLE IF NOT EXISTS lineage_staged (
	artifact BLOB NOT NULL,
	sid BLOB NOT NULL,
	gen INTEGER NOT NULL,
	direct INTEGER NOT NULL,
	PRIMARY KEY (artifact, sid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS parents_staged (
	artifact BLOB NOT NULL,
	parent BLOB NOT NULL,
	PRIMARY KEY (artifact, parent)) WITHOUT ROWID;
-- Both tables as one, for the readers by subject that must not wait for a
-- settle (a forget's verification, the holders' purge work): a subject's
-- staged rows are found by a scan of the staging table, which the
-- background settle keeps to about a second of registrations.
CREATE VIEW IF NOT EXISTS lineage_all AS
	SELECT sid, artifact, gen, direct FROM lineage
	UNION ALL SELECT sid, artifact, gen, direct FROM lineage_staged;
