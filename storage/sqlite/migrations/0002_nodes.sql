-- Many nodes on one database (a backend many processes share; on SQLite,
-- one process owns the file, and these tables stay empty).
-- nodes: each live node's heartbeat, its key cache TTL and the newest
-- eviction (evictions.seq) it has applied to its cache.
CREATE TABLE IF NOT EXISTS nodes (
	id TEXT PRIMARY KEY,
	started_at INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL,
	cache_ttl INTEGER NOT NULL,
	evicted_through INTEGER NOT NULL);
-- evictions: one row per forget commit, in commit order (seq), so that a
-- node can say which forgets its cache has caught up with.
CREATE TABLE IF NOT EXISTS evictions (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	sid BLOB NOT NULL,
	at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS evictions_by_sid ON evictions(sid);
