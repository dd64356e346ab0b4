-- See storage/sqlite/migrations/0009_artifact_facts.sql.
CREATE INDEX artifacts_facts ON artifacts(id) INCLUDE (sealed, kind, holder);
