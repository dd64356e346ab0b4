-- shredd's schema as of release 0.1 (2026-12), the first recorded
-- migration. Data directories made before migrations were recorded also
-- pass through here: every statement is IF NOT EXISTS, and the Go half of
-- this migration (legacyUpgrade) adds the columns and the subjects layout
-- that earlier releases lacked.

-- keystore: the key tree.
CREATE TABLE IF NOT EXISTS keystore_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
-- One row per bucket key: wrapped under root version root_version; while a
-- re-key is under way, the next generation's key wrapped under
-- next_version.
CREATE TABLE IF NOT EXISTS buckets (
	id INTEGER PRIMARY KEY,
	gen INTEGER NOT NULL,
	root_version INTEGER NOT NULL,
	wrapped BLOB NOT NULL,
	next_wrapped BLOB,
	next_version INTEGER);
-- One row per subject (sid is the keyed hash, never the raw id), keyed by
-- bucket then sid so that a bucket's keys are adjacent. wrapped is NULL once
-- forgotten; the row stays as the tombstone that refuses the subject.
CREATE TABLE IF NOT EXISTS subjects (
	sid BLOB NOT NULL,
	gen INTEGER NOT NULL,
	state INTEGER NOT NULL,
	bucket INTEGER NOT NULL,
	bucket_gen INTEGER,
	wrapped BLOB,
	created_at INTEGER NOT NULL,
	forgotten_at INTEGER,
	PRIMARY KEY (bucket, sid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epochs (
	id INTEGER PRIMARY KEY,
	state TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	finished_at INTEGER,
	from_version INTEGER NOT NULL,
	to_version INTEGER,
	retired TEXT);

-- derivation: the registry. seq (the rowid) orders artifacts against
-- forget barriers.
CREATE TABLE IF NOT EXISTS kinds (
	name TEXT PRIMARY KEY,
	description TEXT NOT NULL,
	created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS artifacts (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id BLOB NOT NULL UNIQUE,
	kind TEXT NOT NULL REFERENCES kinds(name),
	holder TEXT NOT NULL,
	sealed INTEGER NOT NULL,
	created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS artifact_parents (
	artifact BLOB NOT NULL,
	parent BLOB NOT NULL,
	PRIMARY KEY (artifact, parent)) WITHOUT ROWID;
-- The flat lineage: one row per (subject, artifact) of the closure; direct
-- marks the artifact's own subjects.
CREATE TABLE IF NOT EXISTS lineage (
	sid BLOB NOT NULL,
	artifact BLOB NOT NULL,
	gen INTEGER NOT NULL,
	direct INTEGER NOT NULL,
	PRIMARY KEY (sid, artifact)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lineage_by_artifact ON lineage(artifact);
CREATE INDEX IF NOT EXISTS parents_by_parent ON artifact_parents(parent);
-- One row per forget; attestation is the file as signed when the forget was
-- erased, served byte for byte, so that its digest in the log matches.
CREATE TABLE IF NOT EXISTS forgets (
	id BLOB PRIMARY KEY,
	sid BLOB NOT NULL,
	gen INTEGER,
	state TEXT NOT NULL,
	barrier INTEGER,
	requested_at INTEGER NOT NULL,
	committed_at INTEGER,
	rekeyed_at INTEGER,
	rekey_marker INTEGER,
	shredded_at INTEGER,
	epoch INTEGER,
	deadline INTEGER NOT NULL,
	erased_at INTEGER,
	commitment TEXT,
	proof BLOB,
	attestation BLOB);
CREATE INDEX IF NOT EXISTS forgets_by_sid ON forgets(sid);
CREATE INDEX IF NOT EXISTS forgets_by_state ON forgets(state);
CREATE TABLE IF NOT EXISTS leases (
	id BLOB PRIMARY KEY,
	artifact BLOB NOT NULL,
	holder TEXT NOT NULL,
	issued_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	released_at INTEGER);
CREATE INDEX IF NOT EXISTS leases_by_artifact ON leases(artifact);
CREATE TABLE IF NOT EXISTS holders (
	id TEXT PRIMARY KEY,
	public_key BLOB NOT NULL,
	created_at INTEGER NOT NULL);
-- Every signed ack as received: the exact signed bytes and the signature,
-- kept as evidence for the attestation.
CREATE TABLE IF NOT EXISTS holder_acks (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	forget BLOB NOT NULL,
	holder TEXT NOT NULL,
	artifacts TEXT NOT NULL,
	payload BLOB NOT NULL,
	signature BLOB NOT NULL,
	received_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS holder_acks_by_forget ON holder_acks(forget);
-- Which ack closed each artifact: exactly one.
CREATE TABLE IF NOT EXISTS acked (
	forget BLOB NOT NULL,
	artifact BLOB NOT NULL,
	holder TEXT NOT NULL,
	ack INTEGER NOT NULL,
	PRIMARY KEY (forget, artifact)) WITHOUT ROWID;
-- The latest inventory of each holder: what it holds that shredd never
-- registered breaks the closure of every open forget.
CREATE TABLE IF NOT EXISTS inventories (
	holder TEXT PRIMARY KEY,
	reported_at INTEGER NOT NULL,
	items INTEGER NOT NULL,
	unknown_artifacts INTEGER NOT NULL,
	unknown_kinds INTEGER NOT NULL);

-- The journal: where each lifecycle event stands in the transparency log.
-- The log index of each subject key generation's key_created event, so that
-- the forget that destroys it can name it.
CREATE TABLE IF NOT EXISTS subject_log (
	sid BLOB NOT NULL,
	gen INTEGER NOT NULL,
	key_created INTEGER NOT NULL,
	PRIMARY KEY (sid, gen)) WITHOUT ROWID;
-- The log indexes of each forget's events (commit, holder acks,
-- attestation) and of each epoch's, for the regulator export.
CREATE TABLE IF NOT EXISTS forget_log (
	forget BLOB NOT NULL,
	idx INTEGER NOT NULL,
	PRIMARY KEY (forget, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epoch_log (
	epoch INTEGER PRIMARY KEY,
	idx INTEGER NOT NULL);

-- translog: the transparency log. Entries and the stored hashes of
-- golang.org/x/mod/sumdb/tlog are keyed by an INTEGER PRIMARY KEY (the
-- rowid): a point read, max(idx) (the tree size) and a range of entries are
-- B-tree lookups, never scans. log_hashes.idx is tlog.StoredHashIndex.
CREATE TABLE IF NOT EXISTS log_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_entries (idx INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);

-- api: bearer tokens, by the SHA-256 of the secret.
CREATE TABLE IF NOT EXISTS tokens (
	id TEXT PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,
	name TEXT NOT NULL,
	scopes TEXT NOT NULL,
	holder TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	revoked_at INTEGER);

-- The readiness probe's one row (ProbeWrite).
CREATE TABLE IF NOT EXISTS readiness (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	checked_at INTEGER NOT NULL);
