package keystore

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/storage"
)

// Domain-separation labels of the key tree.
const (
	// LabelDEKWrap is bound (with sid, generation, bucket and bucket
	// generation) into the associated data of a DEK wrapped by a bucket key.
	LabelDEKWrap = "shredd/v1/dek-wrap"
)

// Defaults of Options.
const (
	DefaultBuckets   = 4096
	DefaultCacheTTL  = 30 * time.Second
	DefaultCacheSize = 100_000
)

// Options configures a Tree. Zero values take the defaults.
type Options struct {
	// Buckets is the number of bucket keys, fixed when the tree is created.
	Buckets int
	// CacheTTL bounds how long an unwrapped key stays in memory. It is the
	// part of T_prop that other nodes add to a forget.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached subject keys.
	CacheSize int
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// SubjectKMS, when set, keeps each subject's key in its own external key
	// (one Vault Transit key per subject) instead of the bucket tree. The
	// choice is fixed when the tree is created.
	SubjectKMS SubjectKMS
	// Journal, when set, logs key creations and epochs in the transaction
	// that makes them.
	Journal *journal.Journal
}

// SubjectState says what the tree knows of one subject.
type SubjectState int

// Subject states.
const (
	SubjectUnknown SubjectState = iota
	SubjectLive
	SubjectForgotten
)

// Tree is the key tree kept in the database under a RootStore: the subject
// keys, their creation and their cache, and the forget that deletes one
// (ForgetTx). What destroys keys beyond that and proves it is its Shredder
// (NewShredder), what keeps other nodes' caches in step its Follower
// (NewFollower), and its counters are read through Stats (NewStats); they
// share the Tree's state.
type Tree struct {
	db      *storage.DB
	root    RootStore
	kms     SubjectKMS // per-subject mode when not nil
	buckets int
	ttl     time.Duration
	now     func() time.Time
	journal *journal.Journal

	treeMu sync.Mutex // serialises bucket re-keys and epochs

	cacheMu   sync.Mutex
	deks      map[envelope.SID]dekEntry
	bkeys     map[int]bucketEntry
	cacheSize int
	purges    atomic.Uint64 // bumped by every purge; a lookup that raced one is not cached

	hits, misses atomic.Uint64
	stats        treeStats // root store errors and epochs (stats.go)
}

type dekEntry struct {
	gen     uint32
	key     []byte
	expires time.Time
}

type bucketEntry struct {
	gen     int64
	key     []byte
	next    []byte // the key of generation gen+1 while a re-key is under way (Shredder.RekeyBucket), else nil
	expires time.Time
}

// Open opens the key tree in db (whose tables storage/sqlite's migrations
// make) under root, creating the bucket keys on first use.
func Open(ctx context.Context, db *storage.DB, root RootStore, opts Options) (*Tree, error) {
	t := &Tree{db: db, root: root, kms: opts.SubjectKMS, ttl: opts.CacheTTL, now: opts.Now, journal: opts.Journal,
		deks: map[envelope.SID]dekEntry{}, bkeys: map[int]bucketEntry{}, cacheSize: opts.CacheSize}
	t.root, t.kms = t.stats.counted(root, opts.SubjectKMS) // count unavailability (RootErrors)
	if t.ttl <= 0 {
		t.ttl = DefaultCacheTTL
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.cacheSize <= 0 {
		t.cacheSize = DefaultCacheSize
	}
	n, err := t.initBuckets(ctx, opts.Buckets)
	if err != nil {
		return nil, err
	}
	t.buckets = n
	if err := t.initMode(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Subject key modes, recorded in keystore_meta when the tree is created.
const (
	modeTree       = 0
	modePerSubject = 1
)

func (t *Tree) initMode(ctx context.Context) error {
	want := int64(modeTree)
	if t.kms != nil {
		want = modePerSubject
	}
	if _, err := t.db.ExecContext(ctx, `INSERT INTO keystore_meta(k, v) VALUES ('subject_keys', ?) ON CONFLICT DO NOTHING`, want); err != nil {
		return fmt.Errorf("keystore: open: %w", err)
	}
	var got int64
	if err := t.db.QueryRowContext(ctx, `SELECT v FROM keystore_meta WHERE k='subject_keys'`).Scan(&got); err != nil {
		return fmt.Errorf("keystore: open: %w", err)
	}
	if got != want {
		return fmt.Errorf("keystore: the data directory was created with subject keys in mode %d, opened in mode %d: %w", got, want, shredd.ErrInvalid)
	}
	return nil
}

// PerSubject reports whether subject keys live in per-subject external keys
// (destroyed at forget) rather than in the bucket tree (re-key and epoch).
func (t *Tree) PerSubject() bool { return t.kms != nil }

// CacheTTL returns the bound on how long an unwrapped key is cached.
func (t *Tree) CacheTTL() time.Duration { return t.ttl }

// Root returns the root store.
func (t *Tree) Root() RootStore { return uncounted(t.root) }

func (t *Tree) initBuckets(ctx context.Context, want int) (int, error) {
	var n int64
	err := t.db.QueryRowContext(ctx, `SELECT v FROM keystore_meta WHERE k='buckets'`).Scan(&n)
	if err == nil {
		if want != 0 && int64(want) != n {
			return 0, errBuckets(n, want)
		}
		return int(n), nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("keystore: open: %w", err)
	}
	if want <= 0 {
		want = DefaultBuckets
	}
	if want > 1<<20 {
		return 0, fmt.Errorf("keystore: %d buckets: %w", want, shredd.ErrInvalid)
	}
	keys := make([][]byte, want)
	for i := range keys {
		keys[i] = newKey()
	}
	var ws []Wrapped
	for i := 0; i < want; i += batchSize {
		w, err := t.root.Wrap(ctx, keys[i:min(i+batchSize, want)])
		if err != nil {
			return 0, fmt.Errorf("keystore: create buckets: %w", err)
		}
		ws = append(ws, w...)
	}
	for _, k := range keys {
		clear(k)
	}
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	for i, w := range ws {
		if _, err := tx.ExecContext(ctx, `INSERT INTO buckets(id, gen, root_version, wrapped) VALUES (?, 1, ?, ?)`, i, w.Version, w.Blob); err != nil {
			return 0, fmt.Errorf("keystore: create buckets: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO keystore_meta(k, v) VALUES ('buckets', ?)`, want); err != nil {
		return 0, err
	}
	return want, tx.Commit()
}

// batchSize bounds one call to the root store.
const batchSize = 256

func newKey() []byte {
	k := make([]byte, envelope.KeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k
}

// BucketOf returns the bucket of a subject.
func (t *Tree) BucketOf(sid envelope.SID) int {
	return int(binary.BigEndian.Uint64(sid[:8]) % uint64(t.buckets))
}

// ShardOf returns the lock shard of a subject (storage.TxOptions): the
// buckets are split into storage.Shards ranges of consecutive buckets, so
// that a shard is a set of whole buckets, and a bucket's subjects share
// one shard. With fewer buckets than shards, a shard is one bucket. The
// bucket count is the database's (fixed when the tree is made), so every
// node maps a subject to the same shard.
func (t *Tree) ShardOf(sid envelope.SID) int {
	return t.shardOfBucket(t.BucketOf(sid))
}

// shardOfBucket returns the lock shard of bucket b's subjects.
func (t *Tree) shardOfBucket(b int) int { return b * storage.Shards / t.buckets }

// bucketShards returns the lock shards of the subjects of buckets, for a
// re-key that declares them (storage.TxOptions, Exclusive): a forget of
// one of those subjects waits for the re-key's transaction, and forgets
// and registrations of other shards commit beside it.
func (t *Tree) bucketShards(buckets ...int) storage.TxOptions {
	o := storage.TxOptions{Exclusive: true, Shards: make([]int, 0, len(buckets))}
	for _, b := range buckets {
		o.Shards = append(o.Shards, t.shardOfBucket(b))
	}
	return o
}

func dekAAD(sid envelope.SID, gen uint32, bucket int, bucketGen int64) []byte {
	b := make([]byte, 0, len(LabelDEKWrap)+envelope.SIDSize+16)
	b = append(b, LabelDEKWrap...)
	b = append(b, sid[:]...)
	b = binary.BigEndian.AppendUint32(b, gen)
	b = binary.BigEndian.AppendUint32(b, uint32(bucket))
	b = binary.BigEndian.AppendUint64(b, uint64(bucketGen))
	return b
}

func aead(k []byte) cipher.AEAD {
	c, err := aes.NewCipher(k)
	if err != nil {
		panic(err)
	}
	a, err := cipher.NewGCM(c)
	if err != nil {
		panic(err)
	}
	return a
}

// wrapDEK seals a DEK under a bucket key: nonce (12) ‖ AES-256-GCM output. A
// random nonce is safe: a bucket key wraps only the DEKs of its bucket.
func wrapDEK(bk, dek []byte, aad []byte) []byte {
	a := aead(bk)
	out := make([]byte, a.NonceSize(), a.NonceSize()+len(dek)+a.Overhead())
	if _, err := rand.Read(out); err != nil {
		panic(err)
	}
	return a.Seal(out, out[:a.NonceSize()], dek, aad)
}

func unwrapDEK(bk, blob []byte, aad []byte) ([]byte, error) {
	a := aead(bk)
	if len(blob) < a.NonceSize()+a.Overhead() {
		return nil, ErrCorrupt
	}
	p, err := a.Open(nil, blob[:a.NonceSize()], blob[a.NonceSize():], aad)
	if err != nil {
		return nil, ErrCorrupt
	}
	return p, nil
}

// bucketKey returns the unwrapped key of a bucket at its current generation.
// The cache keeps its own copy and hands out clones, so that clearing an
// expired or replaced entry never zeroes a key a request is still using.
func (t *Tree) bucketKey(ctx context.Context, b int) (int64, []byte, error) {
	e, err := t.bucketKeys(ctx, b)
	if err != nil {
		return 0, nil, err
	}
	clear(e.next)
	return e.gen, e.key, nil
}

// bucketKeys is bucketKey with the key of the next generation too, while a
// re-key is under way (its subjects are wrapped under one or the other).
func (t *Tree) bucketKeys(ctx context.Context, b int) (bucketEntry, error) {
	now := t.now()
	t.cacheMu.Lock()
	if e, ok := t.bkeys[b]; ok && now.Before(e.expires) {
		// Copied under the lock: setBucketKey clears the entry it
		// replaces, and a copy taken after it did would be zeros, under
		// which a key created now would be wrapped for good.
		out := bucketEntry{gen: e.gen, key: slices.Clone(e.key), next: slices.Clone(e.next)}
		t.cacheMu.Unlock()
		return out, nil
	}
	t.cacheMu.Unlock()
	for attempt := 0; ; attempt++ {
		purges := t.purges.Load()
		var gen int64
		var version int
		var blob, next []byte
		if err := t.db.QueryRowContext(ctx, `SELECT gen, root_version, wrapped, next_wrapped FROM buckets WHERE id=?`, b).Scan(&gen, &version, &blob, &next); err != nil {
			return bucketEntry{}, fmt.Errorf("keystore: bucket %d: %w", b, err)
		}
		blobs := [][]byte{blob}
		if next != nil {
			blobs = append(blobs, next)
		}
		ks, err := t.root.Unwrap(ctx, blobs)
		if errors.Is(err, ErrVersionDestroyed) && attempt < 3 {
			// An epoch may have rewrapped the row and trimmed the version
			// between the read and the unwrap: read the row again. Only a row
			// still under a destroyed version is really destroyed.
			var cur int
			if err := t.db.QueryRowContext(ctx, `SELECT root_version FROM buckets WHERE id=?`, b).Scan(&cur); err == nil && cur != version {
				continue
			}
		}
		if err != nil {
			return bucketEntry{}, fmt.Errorf("keystore: bucket %d: %w", b, err)
		}
		e := bucketEntry{gen: gen, key: ks[0]}
		if next != nil {
			e.next = ks[1]
		}
		t.cacheMu.Lock()
		if t.purges.Load() == purges {
			t.bkeys[b] = bucketEntry{gen: gen, key: slices.Clone(e.key), next: slices.Clone(e.next), expires: now.Add(t.ttl)}
		}
		t.cacheMu.Unlock()
		return e, nil
	}
}

// cached returns a cached subject key. The entry's key is the cache's own
// copy; the caller gets a clone.
func (t *Tree) cached(sid envelope.SID) (dekEntry, bool) {
	t.cacheMu.Lock()
	defer t.cacheMu.Unlock()
	e, ok := t.deks[sid]
	if !ok {
		return dekEntry{}, false
	}
	if !t.now().Before(e.expires) {
		delete(t.deks, sid)
		clear(e.key)
		return dekEntry{}, false
	}
	e.key = slices.Clone(e.key)
	return e, true
}

func (t *Tree) remember(sid envelope.SID, gen uint32, key []byte, purges uint64) {
	t.cacheMu.Lock()
	defer t.cacheMu.Unlock()
	if t.purges.Load() != purges {
		return // a forget ran during the lookup: do not cache what it may have destroyed
	}
	if len(t.deks) >= t.cacheSize {
		now := t.now()
		for k, e := range t.deks { // drop expired entries, then arbitrary ones
			if !now.Before(e.expires) || len(t.deks) >= t.cacheSize {
				delete(t.deks, k)
			}
			if len(t.deks) < t.cacheSize*9/10 {
				break
			}
		}
	}
	t.deks[sid] = dekEntry{gen: gen, key: slices.Clone(key), expires: t.now().Add(t.ttl)}
}

// setBucketKey caches copies of bucket b's key of generation gen and, while
// a re-key is under way, next, the key of generation gen+1, in place of
// what was cached for b. It counts as a purge: a lookup that raced it does
// not cache what it read.
func (t *Tree) setBucketKey(b int, gen int64, key, next []byte) {
	t.cacheMu.Lock()
	t.purges.Add(1)
	if e, ok := t.bkeys[b]; ok {
		clear(e.key)
		clear(e.next)
	}
	t.bkeys[b] = bucketEntry{gen: gen, key: slices.Clone(key), next: slices.Clone(next), expires: t.now().Add(t.ttl)}
	t.cacheMu.Unlock()
}

// dropBucketKeys drops every cached bucket key (the subject keys stay).
func (t *Tree) dropBucketKeys() {
	t.cacheMu.Lock()
	clear(t.bkeys)
	t.cacheMu.Unlock()
}

// lockTree takes treeMu and, where nodes share the database, the
// cluster-wide lock of the key tree: re-keys and epochs run on one node at
// a time. A lock the database cannot give is reported as
// ErrRootUnavailable: the callers fail closed on it (503, and the
// tombstone check of a read) as on a root store down.
func (t *Tree) lockTree(ctx context.Context) (func(), error) {
	t.treeMu.Lock()
	release, err := t.db.Exclusive(ctx, "keystore.tree")
	if err != nil {
		t.treeMu.Unlock()
		return nil, fmt.Errorf("keystore: %w: %w", ErrRootUnavailable, err)
	}
	return func() {
		release()
		t.treeMu.Unlock()
	}, nil
}

// PurgeAll drops every cached key from memory: what a node does when it
// may have missed another node's forget (its listener reconnected).
func (t *Tree) PurgeAll() {
	t.cacheMu.Lock()
	defer t.cacheMu.Unlock()
	t.purges.Add(1)
	for sid, e := range t.deks {
		clear(e.key)
		delete(t.deks, sid)
	}
	clear(t.bkeys)
}

// Purge drops every cached key of the subject and its bucket from memory.
func (t *Tree) Purge(sid envelope.SID) {
	t.cacheMu.Lock()
	defer t.cacheMu.Unlock()
	t.purges.Add(1)
	if e, ok := t.deks[sid]; ok {
		clear(e.key)
		delete(t.deks, sid)
	}
	delete(t.bkeys, t.BucketOf(sid))
}

type subjectRow struct {
	gen       uint32
	state     SubjectState
	bucket    int
	bucketGen sql.NullInt64
	wrapped   []byte
}

// liveAt returns nil when the subject's key of generation gen is live,
// ErrShredded when it was destroyed (the subject forgotten, or an older
// generation), ErrNotFound when it never existed (generation 0, one above
// the newest, or a subject never seen).
func (r subjectRow) liveAt(gen uint32) error {
	switch {
	case r.state == SubjectUnknown || gen == 0 || gen > r.gen:
		return ErrNotFound
	case r.state == SubjectForgotten || gen < r.gen:
		return ErrShredded
	}
	return nil
}

func (t *Tree) row(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sid envelope.SID) (subjectRow, error) {
	var r subjectRow
	err := q.QueryRowContext(ctx, `SELECT gen, state, bucket, bucket_gen, wrapped FROM subjects WHERE bucket=? AND sid=?`, t.BucketOf(sid), sid[:]).
		Scan(&r.gen, &r.state, &r.bucket, &r.bucketGen, &r.wrapped)
	if errors.Is(err, sql.ErrNoRows) {
		return subjectRow{state: SubjectUnknown}, nil
	}
	if err != nil {
		return subjectRow{}, fmt.Errorf("keystore: subject: %w", err)
	}
	return r, nil
}

// State reports whether the subject is unknown, live or forgotten, and its
// current key generation.
func (t *Tree) State(ctx context.Context, sid envelope.SID) (SubjectState, uint32, error) {
	r, err := t.row(ctx, t.db, sid)
	return r.state, r.gen, err
}

// Key returns the subject's current key, creating generation 1 for a subject
// never seen before. A forgotten subject gives ErrShredded. It is KeyWithSubject
// without a subject id.
func (t *Tree) Key(ctx context.Context, sid envelope.SID) (envelope.SubjectKey, error) {
	return t.KeyWithSubject(ctx, sid, "")
}

// KeyWithSubject is Key for the raw subject id whose keyed hash is sid: when it
// creates the key, the Journal gets the id for the key_created event's
// salted commitment. The id is never stored.
func (t *Tree) KeyWithSubject(ctx context.Context, sid envelope.SID, subject string) (envelope.SubjectKey, error) {
	if e, ok := t.cached(sid); ok {
		t.hits.Add(1)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: e.gen}, Key: e.key}, nil
	}
	t.misses.Add(1)
	purges := t.purges.Load()
	r, err := t.row(ctx, t.db, sid)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	switch r.state {
	case SubjectForgotten:
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
	case SubjectLive:
		k, err := t.open(ctx, sid, r)
		if err != nil {
			return envelope.SubjectKey{}, err
		}
		t.remember(sid, r.gen, k, purges)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
	}
	return t.create(ctx, sid, subject, purges)
}

// KeyAt returns the subject's key of generation ref.Gen. A forgotten subject
// or an older, destroyed generation gives ErrShredded; a subject or
// generation that never existed gives ErrNotFound: one above the subject's
// newest, and generation 0, which no key has (keys start at 1; a subject
// forgotten before it had a key keeps a tombstone of generation 0). The
// difference matters to callers: ErrShredded claims an erasure, so a forged
// or corrupt reference must not get it.
func (t *Tree) KeyAt(ctx context.Context, ref envelope.Ref) (envelope.SubjectKey, error) {
	if e, ok := t.cached(ref.SID); ok && e.gen == ref.Gen {
		t.hits.Add(1)
		return envelope.SubjectKey{Ref: ref, Key: e.key}, nil
	}
	t.misses.Add(1)
	purges := t.purges.Load()
	r, err := t.row(ctx, t.db, ref.SID)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	if err := r.liveAt(ref.Gen); err != nil {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", err)
	}
	k, err := t.open(ctx, ref.SID, r)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	t.remember(ref.SID, r.gen, k, purges)
	return envelope.SubjectKey{Ref: ref, Key: k}, nil
}

func (t *Tree) open(ctx context.Context, sid envelope.SID, r subjectRow) ([]byte, error) {
	if t.kms != nil {
		k, err := t.kms.Decrypt(ctx, sid, r.wrapped)
		if err != nil {
			return nil, fmt.Errorf("keystore: subject key: %w", err)
		}
		return k, nil
	}
	for attempt := 0; ; attempt++ {
		e, err := t.bucketKeys(ctx, r.bucket)
		if err != nil {
			return nil, err
		}
		var bk []byte
		switch {
		case r.bucketGen.Int64 == e.gen:
			bk = e.key
		case e.next != nil && r.bucketGen.Int64 == e.gen+1:
			bk = e.next // re-wrapped by a re-key under way
		}
		if bk != nil {
			k, err := unwrapDEK(bk, r.wrapped, dekAAD(sid, r.gen, r.bucket, r.bucketGen.Int64))
			clear(e.key)
			clear(e.next)
			if err != nil {
				return nil, fmt.Errorf("keystore: subject key: %w", err)
			}
			return k, nil
		}
		clear(e.key)
		clear(e.next)
		// The bucket was re-keyed since the row was read (or the cached
		// bucket key is stale): read both again.
		t.cacheMu.Lock()
		delete(t.bkeys, r.bucket)
		t.cacheMu.Unlock()
		if attempt == 3 {
			return nil, fmt.Errorf("keystore: subject key: bucket generation keeps changing")
		}
		if attempt == 2 {
			// Re-keys keep winning the race: read the row and the
			// bucket key again with re-keys held off (the tree lock).
			unlock, err := t.lockTree(ctx)
			if err != nil {
				return nil, err
			}
			defer unlock()
		}
		if r, err = t.row(ctx, t.db, sid); err != nil {
			return nil, err
		}
		if r.state != SubjectLive {
			return nil, fmt.Errorf("keystore: key: %w", ErrShredded)
		}
	}
}

func (t *Tree) create(ctx context.Context, sid envelope.SID, subject string, purges uint64) (envelope.SubjectKey, error) {
	if t.kms != nil {
		return t.createPerSubject(ctx, sid, subject, purges)
	}
	b := t.BucketOf(sid)
	for attempt := 0; attempt < 4; attempt++ {
		unlock := func() {}
		if attempt == 3 {
			// Re-keys of the bucket keep winning the race (the write gate
			// serves them in turn): try once more with them held off.
			var err error
			if unlock, err = t.lockTree(ctx); err != nil {
				return envelope.SubjectKey{}, err
			}
		}
		k, r, err := t.tryCreate(ctx, sid, subject, b, purges)
		unlock()
		if err != nil || r == nil {
			return k, err
		}
		switch r.state {
		case SubjectForgotten:
			return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
		case SubjectLive: // created concurrently
			k, err := t.open(ctx, sid, *r)
			if err != nil {
				return envelope.SubjectKey{}, err
			}
			return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
		}
		// bucket re-keyed meanwhile: drop the stale bucket key and retry
		t.cacheMu.Lock()
		delete(t.bkeys, b)
		t.cacheMu.Unlock()
	}
	return envelope.SubjectKey{}, fmt.Errorf("keystore: create key: bucket generation keeps changing")
}

// tryCreate inserts a new key for sid wrapped by the bucket's current key.
// It returns the key, or the subject's row as it found it when the insert
// did not happen (the subject exists, or the bucket was re-keyed since its
// key was read: an unknown subject).
func (t *Tree) tryCreate(ctx context.Context, sid envelope.SID, subject string, b int, purges uint64) (envelope.SubjectKey, *subjectRow, error) {
	gen, bk, err := t.bucketKey(ctx, b)
	if err != nil {
		return envelope.SubjectKey{}, nil, err
	}
	dek := newKey()
	blob := wrapDEK(bk, dek, dekAAD(sid, 1, b, gen))
	clear(bk)
	created := false
	defer func() {
		if !created {
			clear(dek)
		}
	}()
	tx, err := t.db.BeginTouching(ctx, t.creating(sid))
	if err != nil {
		return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
	}
	// Insert only while the bucket is still at the generation that wrapped
	// the DEK: a re-key in between would otherwise orphan it.
	res, err := tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, bucket_gen, wrapped, created_at)
		SELECT ?, 1, ?, ?, gen, ?, ? FROM buckets WHERE id=? AND gen=? ON CONFLICT DO NOTHING`,
		sid[:], SubjectLive, b, blob, t.now().UnixNano(), b, gen)
	if err != nil {
		tx.Rollback()
		return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 1 {
		k := envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}
		if err := t.journalKey(ctx, tx, k, subject); err != nil {
			tx.Rollback()
			return envelope.SubjectKey{}, nil, err
		}
		if err := tx.Commit(); err != nil {
			return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
		}
		crashpoint.Hit("key:created")
		t.remember(sid, 1, dek, purges)
		created = true
		return k, nil, nil
	}
	r, err := t.row(ctx, tx, sid)
	tx.Rollback()
	if err != nil {
		return envelope.SubjectKey{}, nil, err
	}
	return envelope.SubjectKey{}, &r, nil
}

// creating is what the creation of sid's key declares (storage.TxOptions):
// its shard, shared. It inserts the subject's row (two creations of one
// subject: the unique key takes one) and reads its bucket's generation,
// so it waits for a forget of a subject of the shard and for a re-key of
// its bucket (both take the shard alone), and commits beside
// registrations and creations of other subjects. Its log entry takes the
// sequence lock (storage.Tx.Sequence).
func (t *Tree) creating(sid envelope.SID) storage.TxOptions {
	return storage.TxOptions{Shards: []int{t.ShardOf(sid)}}
}

// journalKey logs a created key in tx, when there is a journal.
func (t *Tree) journalKey(ctx context.Context, tx *storage.Tx, k envelope.SubjectKey, subject string) error {
	if t.journal == nil {
		return nil
	}
	if err := t.journal.KeyCreated(ctx, tx, k, subject); err != nil {
		return fmt.Errorf("keystore: create key: log: %w", err)
	}
	return nil
}

// createPerSubject creates a subject's key in its own external key.
func (t *Tree) createPerSubject(ctx context.Context, sid envelope.SID, subject string, purges uint64) (envelope.SubjectKey, error) {
	dek, wrapped, err := t.kms.DataKey(ctx, sid)
	if err != nil {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: create key: %w", err)
	}
	created, err := func() (bool, error) {
		tx, err := t.db.BeginTouching(ctx, t.creating(sid))
		if err != nil {
			return false, fmt.Errorf("keystore: create key: %w", err)
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, wrapped, created_at) VALUES (?, 1, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			sid[:], SubjectLive, t.BucketOf(sid), wrapped, t.now().UnixNano())
		if err != nil {
			return false, fmt.Errorf("keystore: create key: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, nil
		}
		if err := t.journalKey(ctx, tx, envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, subject); err != nil {
			return false, err
		}
		if err := tx.Commit(); err != nil {
			return false, fmt.Errorf("keystore: create key: %w", err)
		}
		crashpoint.Hit("key:created")
		return true, nil
	}()
	if err != nil {
		clear(dek)
		return envelope.SubjectKey{}, err
	}
	if created {
		t.remember(sid, 1, dek, purges)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, nil
	}
	clear(dek)
	// Created concurrently, or forgotten: read the row that won.
	r, err := t.row(ctx, t.db, sid)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	if r.state != SubjectLive {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
	}
	k, err := t.open(ctx, sid, r)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
}

// CheckLive returns ErrShredded (or ErrNotFound) unless every ref names a
// live subject at its current generation, reading through q (a transaction
// for an atomic check-and-write). As for KeyAt, ErrNotFound is for a
// generation that never existed (0, or above the subject's newest).
func (t *Tree) CheckLive(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, refs []envelope.Ref) error {
	for _, ref := range refs {
		r, err := t.row(ctx, q, ref.SID)
		if err != nil {
			return err
		}
		if err := r.liveAt(ref.Gen); err != nil {
			return fmt.Errorf("keystore: check: %w", err)
		}
	}
	return nil
}

// maxLiveQuery bounds the subjects of one CheckLiveMany query.
const maxLiveQuery = 100

// CheckLiveMany is CheckLive for many refs at once, a query per hundred
// refs (one round trip instead of one per ref): it returns the error of
// each ref that is not live at its generation (absent from the map: live).
func (t *Tree) CheckLiveMany(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, refs []envelope.Ref) (map[envelope.Ref]error, error) {
	out := map[envelope.Ref]error{}
	for len(refs) > 0 {
		chunk := refs[:min(len(refs), maxLiveQuery)]
		refs = refs[len(chunk):]
		var qb strings.Builder
		qb.WriteString(`SELECT sid, gen, state FROM subjects WHERE `)
		args := make([]any, 0, 2*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				qb.WriteString(` OR `)
			}
			qb.WriteString(`(bucket=? AND sid=?)`)
			args = append(args, t.BucketOf(r.SID), r.SID[:])
		}
		rows, err := q.QueryContext(ctx, qb.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("keystore: check: %w", err)
		}
		found := map[envelope.SID]subjectRow{}
		for rows.Next() {
			var b []byte
			var r subjectRow
			if err := rows.Scan(&b, &r.gen, &r.state); err != nil {
				rows.Close()
				return nil, fmt.Errorf("keystore: check: %w", err)
			}
			found[envelope.SID(b)] = r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("keystore: check: %w", err)
		}
		for _, ref := range chunk {
			if err := found[ref.SID].liveAt(ref.Gen); err != nil { // absent: SubjectUnknown
				out[ref] = fmt.Errorf("keystore: check: %w", err)
			}
		}
	}
	return out, nil
}

// ForgetTx destroys the subject's key inside tx: the wrapped DEK is deleted
// (secure_delete zeroes its bytes) and the row becomes a tombstone that
// refuses the subject from then on. A subject never seen gets a tombstone
// too. It returns the generation destroyed (0 for a subject never seen).
// The caller commits tx and then calls Purge and Shredder.RekeyBucket;
// other nodes sharing the database purge the subject when tx commits
// (Follower.Follow).
func (t *Tree) ForgetTx(ctx context.Context, tx *storage.Tx, sid envelope.SID) (uint32, error) {
	now := t.now().UnixNano()
	r, err := t.row(ctx, tx, sid)
	if err != nil {
		return 0, err
	}
	switch r.state {
	case SubjectUnknown:
		_, err = tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, created_at, forgotten_at) VALUES (?, 0, ?, ?, ?, ?)`,
			sid[:], SubjectForgotten, t.BucketOf(sid), now, now)
	default:
		_, err = tx.ExecContext(ctx, `UPDATE subjects SET state=?, wrapped=NULL, bucket_gen=NULL, forgotten_at=coalesce(forgotten_at, ?) WHERE bucket=? AND sid=?`,
			SubjectForgotten, now, r.bucket, sid[:])
	}
	if err != nil {
		return 0, fmt.Errorf("keystore: forget: %w", err)
	}
	if err := t.evictTx(ctx, tx, sid, now); err != nil {
		return 0, fmt.Errorf("keystore: forget: %w", err)
	}
	return r.gen, nil
}

// BulkCreateKeys creates generation-1 keys for many subjects at once, a
// transaction per bucket batch, skipping subjects that already have a row.
// It is the bulk path of Key, for imports and for filling test data
// directories; it caches nothing. subjects, when not nil, are the raw
// subject ids (subjects[i] is the id whose keyed hash is sids[i]) that the
// Journal commits to in each key_created event; with a Journal they are
// required. They are never stored.
func (t *Tree) BulkCreateKeys(ctx context.Context, sids []envelope.SID, subjects []string) error {
	if subjects != nil && len(subjects) != len(sids) {
		return fmt.Errorf("keystore: create keys: %d subject ids for %d sids: %w", len(subjects), len(sids), shredd.ErrInvalid)
	}
	subjectOf := func(i int) string {
		if subjects == nil {
			return ""
		}
		return subjects[i]
	}
	if t.kms != nil {
		for i, sid := range sids {
			if _, err := t.createPerSubject(ctx, sid, subjectOf(i), t.purges.Load()); err != nil && !errors.Is(err, ErrShredded) {
				return err
			}
		}
		return nil
	}
	byBucket := map[int][]newSubject{}
	for i, sid := range sids {
		b := t.BucketOf(sid)
		byBucket[b] = append(byBucket[b], newSubject{sid, subjectOf(i)})
	}
	ids := make([]int, 0, len(byBucket))
	for b := range byBucket {
		ids = append(ids, b)
	}
	slices.Sort(ids)
	now := t.now().UnixNano()
	// Consecutive buckets share a transaction of up to createTxRows rows: a
	// commit (an fsync) per bucket would dominate, and a larger transaction
	// would hold the write lock long enough to delay forgets noticeably.
	for i := 0; i < len(ids); {
		j, rows := i, 0
		for j < len(ids) && (j == i || rows+len(byBucket[ids[j]]) <= createTxRows) {
			rows += len(byBucket[ids[j]])
			j++
		}
		if err := t.createChunk(ctx, ids[i:j], byBucket, now); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// newSubject is a subject BulkCreateKeys creates a key for.
type newSubject struct {
	sid     envelope.SID
	subject string // raw id, for the journal only
}

// createTxRows bounds the subjects BulkCreateKeys inserts in one transaction.
const createTxRows = 10_000

// createChunk creates the keys of the subjects of some buckets in one
// transaction; their bucket keys are unwrapped in batches, and the insert
// happens only if no bucket was re-keyed in between.
func (t *Tree) createChunk(ctx context.Context, buckets []int, byBucket map[int][]newSubject, now int64) error {
	for attempt := 0; attempt < 4; attempt++ {
		gens := make([]int64, len(buckets))
		blobs := make([][]byte, len(buckets))
		for i, b := range buckets {
			if err := t.db.QueryRowContext(ctx, `SELECT gen, wrapped FROM buckets WHERE id=?`, b).Scan(&gens[i], &blobs[i]); err != nil {
				return fmt.Errorf("keystore: create keys: %w", err)
			}
		}
		var bks [][]byte
		for i := 0; i < len(blobs); i += batchSize {
			k, err := t.root.Unwrap(ctx, blobs[i:min(i+batchSize, len(blobs))])
			if err != nil {
				return fmt.Errorf("keystore: create keys: %w", err)
			}
			bks = append(bks, k...)
		}
		done, err := t.insertChunk(ctx, buckets, gens, bks, byBucket, now)
		for _, k := range bks {
			clear(k)
		}
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("keystore: create keys: bucket generation keeps changing")
}

func (t *Tree) insertChunk(ctx context.Context, buckets []int, gens []int64, bks [][]byte, byBucket map[int][]newSubject, now int64) (bool, error) {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("keystore: create keys: %w", err)
	}
	defer tx.Rollback()
	for i, b := range buckets {
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT gen FROM buckets WHERE id=?`, b).Scan(&cur); err != nil {
			return false, fmt.Errorf("keystore: create keys: %w", err)
		}
		if cur != gens[i] {
			return false, nil // re-keyed since the read: read again
		}
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, bucket_gen, wrapped, created_at) VALUES (?, 1, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`)
	if err != nil {
		return false, fmt.Errorf("keystore: create keys: %w", err)
	}
	defer stmt.Close()
	for i, b := range buckets {
		for _, ns := range byBucket[b] {
			sid := ns.sid
			dek := newKey()
			blob := wrapDEK(bks[i], dek, dekAAD(sid, 1, b, gens[i]))
			res, err := stmt.ExecContext(ctx, sid[:], SubjectLive, b, gens[i], blob, now)
			if err != nil {
				clear(dek)
				return false, fmt.Errorf("keystore: create keys: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				err = t.journalKey(ctx, tx, envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, ns.subject)
			}
			clear(dek)
			if err != nil {
				return false, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("keystore: create keys: %w", err)
	}
	crashpoint.Hit("key:created")
	return true, nil
}
