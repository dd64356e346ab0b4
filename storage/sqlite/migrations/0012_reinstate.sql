-- Reinstatement (docs/api.md "Reinstating a subject"): an operator gives a
-- forgotten subject a new key generation. reinstatements (owned by package
-- keystore) records each one, in the transaction that creates the new
-- generation: the subject's keyed hash, the new generation and the one the
-- forget destroyed, that forget's id, when, the index of its
-- subject_reinstated log entry and the operator's reason (never logged).
-- A subject's lineage from its newest reinstatement on is the one its next
-- forget reaches: older generations were erased by the forgets before.
--
-- forgets.reinstated_at marks a forget whose subject was reinstated after
-- it: one forget per subject becomes one forget per subject's life (the
-- unique index on sid covers the forgets not reinstated), so that the
-- forget of a reinstated subject is a new forget. The column and the
-- index are added by the migration's Go half (SQLite has no ADD COLUMN
-- IF NOT EXISTS).
CREATE TABLE IF NOT EXISTS reinstatements (
	sid BLOB NOT NULL,
	gen INTEGER NOT NULL,
	prev_gen INTEGER NOT NULL,
	forget BLOB NOT NULL,
	reinstated_at INTEGER NOT NULL,
	log_index INTEGER NOT NULL,
	reason TEXT NOT NULL,
	PRIMARY KEY (sid, gen)) WITHOUT ROWID;
