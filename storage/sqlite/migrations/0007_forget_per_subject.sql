-- One forget per subject, enforced by the database (issue 26): two nodes
-- forgetting one subject at once each looked, found no forget and wrote
-- their own. The forget's insert now yields to a row of the same sid
-- (ON CONFLICT DO NOTHING) and the caller answers with that one. A
-- database that already holds two forgets of one subject (made by nodes of
-- an earlier release) fails this migration, naming the index.
DROP INDEX IF EXISTS forgets_by_sid;
CREATE UNIQUE INDEX IF NOT EXISTS forgets_one_per_sid ON forgets(sid);
