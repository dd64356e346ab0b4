-- One forget per subject: see storage/sqlite/migrations/0007_forget_per_subject.sql.
CREATE TABLE forget_aliases (
	id BYTEA PRIMARY KEY,
	forget BYTEA NOT NULL);
INSERT INTO forget_aliases (id, forget)
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
DROP INDEX forgets_by_sid;
CREATE UNIQUE INDEX forgets_one_per_sid ON forgets(sid);
