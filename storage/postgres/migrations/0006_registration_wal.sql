-- The registration WAL (docs/design.md, "The registration WAL"). PostgreSQL
-- keeps no WAL (every node writes its registrations in transactions); the
-- table exists so that both backends have the same tables. On SQLite
-- a registration is durable in an append-only segment file under wal/ of
-- the data directory, and package registry folds it into the tables in the
-- background. folded is the last sequence number of the WAL whose
-- registration the tables hold, written in the fold's own transaction;
-- backed_up is the folded number of the newest backup shredd took (NULL:
-- none yet): the WAL keeps the segments after it, so that a restore of that
-- backup registers again what was sealed after it.
CREATE TABLE IF NOT EXISTS registry_wal (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	folded BIGINT NOT NULL,
	backed_up BIGINT);
