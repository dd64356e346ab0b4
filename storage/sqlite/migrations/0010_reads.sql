-- Reads become lineage (docs/api.md "What a read costs a writer"): every
-- write is checked against the leases its writer holds. read_links records,
-- for each write (artifact), the leases it was checked against and how it
-- closed each: named, inherited, independent, or refused (artifact all
-- zero: nothing was written). Owned by package derivation. The columns the
-- check reads (leases.reader, leases.unit, tokens.reads), the writer of an
-- artifact (artifacts.writer: the reader whose reads its write answered
-- for, which a forget's verification looks up) and their indexes are added
-- by the migration's Go half (SQLite has no ADD COLUMN IF NOT EXISTS).
CREATE TABLE IF NOT EXISTS read_links (
	lease BLOB NOT NULL,
	artifact BLOB NOT NULL,
	how TEXT NOT NULL CHECK (how IN ('named', 'inherited', 'independent', 'refused')),
	PRIMARY KEY (lease, artifact));
CREATE INDEX IF NOT EXISTS read_links_by_artifact ON read_links(artifact);
