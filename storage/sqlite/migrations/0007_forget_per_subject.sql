-- One forget per subject, enforced by the database (issue 26): two nodes
-- forgetting one subject at once each looked, found no forget and wrote
-- their own. The forget's insert now yields to a row of the same sid
-- (ON CONFLICT DO NOTHING) and the caller answers with that one.
--
-- A database made by nodes of an earlier release may hold several forgets
-- of one subject, each answered to some caller. They are merged first: per
-- sid the most advanced one is kept (erased > shredded > committed >
-- requested; ties: earliest committed_at, then requested_at, then id), and
-- every other id becomes an alias of it (forget_aliases: reads by an alias
-- id answer the kept forget).
--
-- The rows naming a dropped forget: forget_log (the log indexes of its
-- events) and holder_acks (the signed acks as received) stay as they are,
-- naming the dropped id: they are its history and evidence, and neither
-- can become the kept forget's. An export of the kept forget is checked
-- offline to hold exactly one forget_committed entry, naming it (bundle
-- checkForgetEntries), and an attestation's acks are checked against its
-- own forget id, which the dropped forget's entries and signatures do not
-- name. acked (which ack closed which artifact: the cascade condition) is
-- deleted for the dropped ids for the same reason: the holder acks the
-- kept forget again (its purge work lists it), so that nothing is counted
-- closed by a signature over another id.
CREATE TABLE IF NOT EXISTS forget_aliases (
	id BLOB PRIMARY KEY,
	forget BLOB NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO forget_aliases (id, forget)
SELECT d.id, k.id FROM
	(SELECT id, sid, ROW_NUMBER() OVER (PARTITION BY sid ORDER BY
		CASE WHEN erased_at IS NOT NULL THEN 4 WHEN shredded_at IS NOT NULL OR state = 'shredded' THEN 3
			WHEN committed_at IS NOT NULL OR state <> 'requested' THEN 2 ELSE 1 END DESC,
		committed_at IS NULL, committed_at, requested_at, id) AS rn FROM forgets) d
	JOIN (SELECT id, sid, ROW_NUMBER() OVER (PARTITION BY sid ORDER BY
		CASE WHEN erased_at IS NOT NULL THEN 4 WHEN shredded_at IS NOT NULL OR state = 'shredded' THEN 3
			WHEN committed_at IS NOT NULL OR state <> 'requested' THEN 2 ELSE 1 END DESC,
		committed_at IS NULL, committed_at, requested_at, id) AS rn FROM forgets) k
	ON k.sid = d.sid AND k.rn = 1
	WHERE d.rn > 1;
DELETE FROM acked WHERE forget IN (SELECT id FROM forget_aliases);
DELETE FROM forgets WHERE id IN (SELECT id FROM forget_aliases);
DROP INDEX IF EXISTS forgets_by_sid;
CREATE UNIQUE INDEX IF NOT EXISTS forgets_one_per_sid ON forgets(sid);
