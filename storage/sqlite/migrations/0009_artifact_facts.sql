-- A forget's answer reads, for each lineage row of its subject, whether the
-- artifact is registered, sealed or held in plaintext (and by whom), its
-- kind and its registration order (registry.LineageFactsOf). Through the
-- unique index on id each row was two lookups in a table of millions of
-- rows, the index's and the table's; this index covers the read, so it is
-- one. The query names it (INDEXED BY): the planner prefers the unique
-- index.
CREATE INDEX IF NOT EXISTS artifacts_facts ON artifacts(id, sealed, kind, holder);
