-- See storage/sqlite/migrations/0012_reinstate.sql.
CREATE TABLE reinstatements (
	sid BYTEA NOT NULL,
	gen BIGINT NOT NULL,
	prev_gen BIGINT NOT NULL,
	forget BYTEA NOT NULL,
	reinstated_at BIGINT NOT NULL,
	log_index BIGINT NOT NULL,
	reason TEXT NOT NULL,
	PRIMARY KEY (sid, gen));
ALTER TABLE forgets ADD COLUMN reinstated_at BIGINT;
DROP INDEX forgets_one_per_sid;
CREATE UNIQUE INDEX forgets_one_per_life ON forgets(sid) WHERE reinstated_at IS NULL;
