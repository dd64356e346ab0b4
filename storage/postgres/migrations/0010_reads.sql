-- See storage/sqlite/migrations/0010_reads.sql.
CREATE TABLE read_links (
	lease BYTEA NOT NULL,
	artifact BYTEA NOT NULL,
	how TEXT NOT NULL CHECK (how IN ('named', 'inherited', 'independent', 'refused')),
	PRIMARY KEY (lease, artifact));
CREATE INDEX read_links_by_artifact ON read_links(artifact);
ALTER TABLE leases ADD COLUMN reader TEXT;
ALTER TABLE leases ADD COLUMN unit TEXT NOT NULL DEFAULT '';
CREATE INDEX leases_by_reader ON leases(reader, unit, holder, expires_at);
ALTER TABLE tokens ADD COLUMN reads TEXT;
ALTER TABLE artifacts ADD COLUMN writer TEXT;
CREATE INDEX artifacts_by_writer ON artifacts(writer, created_at) WHERE writer IS NOT NULL;
