-- Registrations append an artifact's lineage and parent rows here, keyed by
-- artifact id (time-ordered), so that a group commit writes a few pages at
-- the end of each table instead of one page per subject in lineage (keyed
-- by subject) and per parent in parents_by_parent. Package sealing moves
-- them into lineage and artifact_parents in the background, a chunk of
-- whole artifacts per transaction (sealing.Service.Settle), and before
-- every query that looks artifacts up by subject or by parent. Readers by
-- artifact read both tables in one statement.
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
