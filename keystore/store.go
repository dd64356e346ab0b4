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
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// Options configures a Store. Zero values take the defaults.
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

// Store is the key tree kept in the database under a RootStore.
type Store struct {
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
	stats        storeStats // root store errors and epochs (stats.go)
}

type dekEntry struct {
	gen     uint32
	key     []byte
	expires time.Time
}

type bucketEntry struct {
	gen     int64
	key     []byte
	next    []byte // the key of generation gen+1 while a re-key is under way (RekeyBucket), else nil
	expires time.Time
}

// Open opens the key tree in db (whose tables storage/sqlite's migrations
// make) under root, creating the bucket keys on first use.
func Open(ctx context.Context, db *storage.DB, root RootStore, opts Options) (*Store, error) {
	s := &Store{db: db, root: root, kms: opts.SubjectKMS, ttl: opts.CacheTTL, now: opts.Now, journal: opts.Journal,
		deks: map[envelope.SID]dekEntry{}, bkeys: map[int]bucketEntry{}, cacheSize: opts.CacheSize}
	s.root, s.kms = s.stats.counted(root, opts.SubjectKMS) // count unavailability (RootErrors)
	if s.ttl <= 0 {
		s.ttl = DefaultCacheTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cacheSize <= 0 {
		s.cacheSize = DefaultCacheSize
	}
	n, err := s.initBuckets(ctx, opts.Buckets)
	if err != nil {
		return nil, err
	}
	s.buckets = n
	if err := s.initMode(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Subject key modes, recorded in keystore_meta when the tree is created.
const (
	modeTree       = 0
	modePerSubject = 1
)

func (s *Store) initMode(ctx context.Context) error {
	want := int64(modeTree)
	if s.kms != nil {
		want = modePerSubject
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO keystore_meta(k, v) VALUES ('subject_keys', ?) ON CONFLICT DO NOTHING`, want); err != nil {
		return fmt.Errorf("keystore: open: %w", err)
	}
	var got int64
	if err := s.db.QueryRowContext(ctx, `SELECT v FROM keystore_meta WHERE k='subject_keys'`).Scan(&got); err != nil {
		return fmt.Errorf("keystore: open: %w", err)
	}
	if got != want {
		return fmt.Errorf("keystore: the data directory was created with subject keys in mode %d, opened in mode %d: %w", got, want, ErrInvalid)
	}
	return nil
}

// PerSubject reports whether subject keys live in per-subject external keys
// (destroyed at forget) rather than in the bucket tree (re-key and epoch).
func (s *Store) PerSubject() bool { return s.kms != nil }

// DestroySubject destroys a forgotten subject's external key (per-subject
// mode). It is idempotent; the forget is shredded once it returned nil.
func (s *Store) DestroySubject(ctx context.Context, sid envelope.SID) error {
	if s.kms == nil {
		return fmt.Errorf("keystore: destroy subject key: not in per-subject mode: %w", ErrInvalid)
	}
	if err := s.kms.Destroy(ctx, sid); err != nil {
		return fmt.Errorf("keystore: destroy subject key: %w", err)
	}
	crashpoint.Hit("subject:destroyed")
	return nil
}

// CacheTTL returns the bound on how long an unwrapped key is cached.
func (s *Store) CacheTTL() time.Duration { return s.ttl }

// Root returns the root store.
func (s *Store) Root() RootStore { return uncounted(s.root) }

// CacheStats returns the number of key cache hits and misses so far.
func (s *Store) CacheStats() (hits, misses uint64) { return s.hits.Load(), s.misses.Load() }

func (s *Store) initBuckets(ctx context.Context, want int) (int, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT v FROM keystore_meta WHERE k='buckets'`).Scan(&n)
	if err == nil {
		if want != 0 && int64(want) != n {
			return 0, fmt.Errorf("keystore: tree has %d buckets, configured %d: %w", n, want, ErrInvalid)
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
		return 0, fmt.Errorf("keystore: %d buckets: %w", want, ErrInvalid)
	}
	keys := make([][]byte, want)
	for i := range keys {
		keys[i] = newKey()
	}
	var ws []Wrapped
	for i := 0; i < want; i += batchSize {
		w, err := s.root.Wrap(ctx, keys[i:min(i+batchSize, want)])
		if err != nil {
			return 0, fmt.Errorf("keystore: create buckets: %w", err)
		}
		ws = append(ws, w...)
	}
	for _, k := range keys {
		clear(k)
	}
	tx, err := s.db.BeginTx(ctx, nil)
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
func (s *Store) BucketOf(sid envelope.SID) int {
	return int(binary.BigEndian.Uint64(sid[:8]) % uint64(s.buckets))
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
func (s *Store) bucketKey(ctx context.Context, b int) (int64, []byte, error) {
	e, err := s.bucketKeys(ctx, b)
	if err != nil {
		return 0, nil, err
	}
	clear(e.next)
	return e.gen, e.key, nil
}

// bucketKeys is bucketKey with the key of the next generation too, while a
// re-key is under way (its subjects are wrapped under one or the other).
func (s *Store) bucketKeys(ctx context.Context, b int) (bucketEntry, error) {
	now := s.now()
	s.cacheMu.Lock()
	e, ok := s.bkeys[b]
	s.cacheMu.Unlock()
	if ok && now.Before(e.expires) {
		return bucketEntry{gen: e.gen, key: slices.Clone(e.key), next: slices.Clone(e.next)}, nil
	}
	for attempt := 0; ; attempt++ {
		purges := s.purges.Load()
		var gen int64
		var version int
		var blob, next []byte
		if err := s.db.QueryRowContext(ctx, `SELECT gen, root_version, wrapped, next_wrapped FROM buckets WHERE id=?`, b).Scan(&gen, &version, &blob, &next); err != nil {
			return bucketEntry{}, fmt.Errorf("keystore: bucket %d: %w", b, err)
		}
		blobs := [][]byte{blob}
		if next != nil {
			blobs = append(blobs, next)
		}
		ks, err := s.root.Unwrap(ctx, blobs)
		if errors.Is(err, ErrVersionDestroyed) && attempt < 3 {
			// An epoch may have rewrapped the row and trimmed the version
			// between the read and the unwrap: read the row again. Only a row
			// still under a destroyed version is really destroyed.
			var cur int
			if err := s.db.QueryRowContext(ctx, `SELECT root_version FROM buckets WHERE id=?`, b).Scan(&cur); err == nil && cur != version {
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
		s.cacheMu.Lock()
		if s.purges.Load() == purges {
			s.bkeys[b] = bucketEntry{gen: gen, key: slices.Clone(e.key), next: slices.Clone(e.next), expires: now.Add(s.ttl)}
		}
		s.cacheMu.Unlock()
		return e, nil
	}
}

// cached returns a cached subject key. The entry's key is the cache's own
// copy; the caller gets a clone.
func (s *Store) cached(sid envelope.SID) (dekEntry, bool) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	e, ok := s.deks[sid]
	if !ok {
		return dekEntry{}, false
	}
	if !s.now().Before(e.expires) {
		delete(s.deks, sid)
		clear(e.key)
		return dekEntry{}, false
	}
	e.key = slices.Clone(e.key)
	return e, true
}

func (s *Store) remember(sid envelope.SID, gen uint32, key []byte, purges uint64) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.purges.Load() != purges {
		return // a forget ran during the lookup: do not cache what it may have destroyed
	}
	if len(s.deks) >= s.cacheSize {
		now := s.now()
		for k, e := range s.deks { // drop expired entries, then arbitrary ones
			if !now.Before(e.expires) || len(s.deks) >= s.cacheSize {
				delete(s.deks, k)
			}
			if len(s.deks) < s.cacheSize*9/10 {
				break
			}
		}
	}
	s.deks[sid] = dekEntry{gen: gen, key: slices.Clone(key), expires: s.now().Add(s.ttl)}
}

// lockTree takes treeMu and, where nodes share the database, the
// cluster-wide lock of the key tree: re-keys and epochs run on one node at
// a time.
func (s *Store) lockTree(ctx context.Context) (func(), error) {
	s.treeMu.Lock()
	release, err := s.db.Exclusive(ctx, "keystore.tree")
	if err != nil {
		s.treeMu.Unlock()
		return nil, fmt.Errorf("keystore: %w: %w", ErrUnavailable, err)
	}
	return func() {
		release()
		s.treeMu.Unlock()
	}, nil
}

// PurgeAll drops every cached key from memory: what a node does when it
// may have missed another node's forget (its listener reconnected).
func (s *Store) PurgeAll() {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	s.purges.Add(1)
	for sid, e := range s.deks {
		clear(e.key)
		delete(s.deks, sid)
	}
	clear(s.bkeys)
}

// Purge drops every cached key of the subject and its bucket from memory.
func (s *Store) Purge(sid envelope.SID) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	s.purges.Add(1)
	if e, ok := s.deks[sid]; ok {
		clear(e.key)
		delete(s.deks, sid)
	}
	delete(s.bkeys, s.BucketOf(sid))
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

func (s *Store) row(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sid envelope.SID) (subjectRow, error) {
	var r subjectRow
	err := q.QueryRowContext(ctx, `SELECT gen, state, bucket, bucket_gen, wrapped FROM subjects WHERE bucket=? AND sid=?`, s.BucketOf(sid), sid[:]).
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
func (s *Store) State(ctx context.Context, sid envelope.SID) (SubjectState, uint32, error) {
	r, err := s.row(ctx, s.db, sid)
	return r.state, r.gen, err
}

// Key returns the subject's current key, creating generation 1 for a subject
// never seen before. A forgotten subject gives ErrShredded. It is KeyWithSubject
// without a subject id.
func (s *Store) Key(ctx context.Context, sid envelope.SID) (envelope.SubjectKey, error) {
	return s.KeyWithSubject(ctx, sid, "")
}

// KeyWithSubject is Key for the raw subject id whose keyed hash is sid: when it
// creates the key, the Journal gets the id for the key_created event's
// salted commitment. The id is never stored.
func (s *Store) KeyWithSubject(ctx context.Context, sid envelope.SID, subject string) (envelope.SubjectKey, error) {
	if e, ok := s.cached(sid); ok {
		s.hits.Add(1)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: e.gen}, Key: e.key}, nil
	}
	s.misses.Add(1)
	purges := s.purges.Load()
	r, err := s.row(ctx, s.db, sid)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	switch r.state {
	case SubjectForgotten:
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
	case SubjectLive:
		k, err := s.open(ctx, sid, r)
		if err != nil {
			return envelope.SubjectKey{}, err
		}
		s.remember(sid, r.gen, k, purges)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
	}
	return s.create(ctx, sid, subject, purges)
}

// KeyAt returns the subject's key of generation ref.Gen. A forgotten subject
// or an older, destroyed generation gives ErrShredded; a subject or
// generation that never existed gives ErrNotFound: one above the subject's
// newest, and generation 0, which no key has (keys start at 1; a subject
// forgotten before it had a key keeps a tombstone of generation 0). The
// difference matters to callers: ErrShredded claims an erasure, so a forged
// or corrupt reference must not get it.
func (s *Store) KeyAt(ctx context.Context, ref envelope.Ref) (envelope.SubjectKey, error) {
	if e, ok := s.cached(ref.SID); ok && e.gen == ref.Gen {
		s.hits.Add(1)
		return envelope.SubjectKey{Ref: ref, Key: e.key}, nil
	}
	s.misses.Add(1)
	purges := s.purges.Load()
	r, err := s.row(ctx, s.db, ref.SID)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	if err := r.liveAt(ref.Gen); err != nil {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", err)
	}
	k, err := s.open(ctx, ref.SID, r)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	s.remember(ref.SID, r.gen, k, purges)
	return envelope.SubjectKey{Ref: ref, Key: k}, nil
}

func (s *Store) open(ctx context.Context, sid envelope.SID, r subjectRow) ([]byte, error) {
	if s.kms != nil {
		k, err := s.kms.Decrypt(ctx, sid, r.wrapped)
		if err != nil {
			return nil, fmt.Errorf("keystore: subject key: %w", err)
		}
		return k, nil
	}
	for attempt := 0; ; attempt++ {
		e, err := s.bucketKeys(ctx, r.bucket)
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
		s.cacheMu.Lock()
		delete(s.bkeys, r.bucket)
		s.cacheMu.Unlock()
		if attempt == 3 {
			return nil, fmt.Errorf("keystore: subject key: bucket generation keeps changing")
		}
		if attempt == 2 {
			// Re-keys keep winning the race: read the row and the
			// bucket key again with re-keys held off (the tree lock).
			unlock, err := s.lockTree(ctx)
			if err != nil {
				return nil, err
			}
			defer unlock()
		}
		if r, err = s.row(ctx, s.db, sid); err != nil {
			return nil, err
		}
		if r.state != SubjectLive {
			return nil, fmt.Errorf("keystore: key: %w", ErrShredded)
		}
	}
}

func (s *Store) create(ctx context.Context, sid envelope.SID, subject string, purges uint64) (envelope.SubjectKey, error) {
	if s.kms != nil {
		return s.createPerSubject(ctx, sid, subject, purges)
	}
	b := s.BucketOf(sid)
	for attempt := 0; attempt < 4; attempt++ {
		unlock := func() {}
		if attempt == 3 {
			// Re-keys of the bucket keep winning the race (the write gate
			// serves them in turn): try once more with them held off.
			var err error
			if unlock, err = s.lockTree(ctx); err != nil {
				return envelope.SubjectKey{}, err
			}
		}
		k, r, err := s.tryCreate(ctx, sid, subject, b, purges)
		unlock()
		if err != nil || r == nil {
			return k, err
		}
		switch r.state {
		case SubjectForgotten:
			return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
		case SubjectLive: // created concurrently
			k, err := s.open(ctx, sid, *r)
			if err != nil {
				return envelope.SubjectKey{}, err
			}
			return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
		}
		// bucket re-keyed meanwhile: drop the stale bucket key and retry
		s.cacheMu.Lock()
		delete(s.bkeys, b)
		s.cacheMu.Unlock()
	}
	return envelope.SubjectKey{}, fmt.Errorf("keystore: create key: bucket generation keeps changing")
}

// tryCreate inserts a new key for sid wrapped by the bucket's current key.
// It returns the key, or the subject's row as it found it when the insert
// did not happen (the subject exists, or the bucket was re-keyed since its
// key was read: an unknown subject).
func (s *Store) tryCreate(ctx context.Context, sid envelope.SID, subject string, b int, purges uint64) (envelope.SubjectKey, *subjectRow, error) {
	gen, bk, err := s.bucketKey(ctx, b)
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
	}
	// Insert only while the bucket is still at the generation that wrapped
	// the DEK: a re-key in between would otherwise orphan it.
	res, err := tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, bucket_gen, wrapped, created_at)
		SELECT ?, 1, ?, ?, gen, ?, ? FROM buckets WHERE id=? AND gen=? ON CONFLICT DO NOTHING`,
		sid[:], SubjectLive, b, blob, s.now().UnixNano(), b, gen)
	if err != nil {
		tx.Rollback()
		return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 1 {
		k := envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}
		if err := s.journalKey(ctx, tx, k, subject); err != nil {
			tx.Rollback()
			return envelope.SubjectKey{}, nil, err
		}
		if err := tx.Commit(); err != nil {
			return envelope.SubjectKey{}, nil, fmt.Errorf("keystore: create key: %w", err)
		}
		crashpoint.Hit("key:created")
		s.remember(sid, 1, dek, purges)
		created = true
		return k, nil, nil
	}
	r, err := s.row(ctx, tx, sid)
	tx.Rollback()
	if err != nil {
		return envelope.SubjectKey{}, nil, err
	}
	return envelope.SubjectKey{}, &r, nil
}

// journalKey logs a created key in tx, when there is a journal.
func (s *Store) journalKey(ctx context.Context, tx *storage.Tx, k envelope.SubjectKey, subject string) error {
	if s.journal == nil {
		return nil
	}
	if err := s.journal.KeyCreated(ctx, tx, k, subject); err != nil {
		return fmt.Errorf("keystore: create key: log: %w", err)
	}
	return nil
}

// createPerSubject creates a subject's key in its own external key.
func (s *Store) createPerSubject(ctx context.Context, sid envelope.SID, subject string, purges uint64) (envelope.SubjectKey, error) {
	dek, wrapped, err := s.kms.DataKey(ctx, sid)
	if err != nil {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: create key: %w", err)
	}
	created, err := func() (bool, error) {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return false, fmt.Errorf("keystore: create key: %w", err)
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, wrapped, created_at) VALUES (?, 1, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			sid[:], SubjectLive, s.BucketOf(sid), wrapped, s.now().UnixNano())
		if err != nil {
			return false, fmt.Errorf("keystore: create key: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, nil
		}
		if err := s.journalKey(ctx, tx, envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, subject); err != nil {
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
		s.remember(sid, 1, dek, purges)
		return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, nil
	}
	clear(dek)
	// Created concurrently, or forgotten: read the row that won.
	r, err := s.row(ctx, s.db, sid)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	if r.state != SubjectLive {
		return envelope.SubjectKey{}, fmt.Errorf("keystore: key: %w", ErrShredded)
	}
	k, err := s.open(ctx, sid, r)
	if err != nil {
		return envelope.SubjectKey{}, err
	}
	return envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: r.gen}, Key: k}, nil
}

// CheckLive returns ErrShredded (or ErrNotFound) unless every ref names a
// live subject at its current generation, reading through q (a transaction
// for an atomic check-and-write). As for KeyAt, ErrNotFound is for a
// generation that never existed (0, or above the subject's newest).
func (s *Store) CheckLive(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, refs []envelope.Ref) error {
	for _, ref := range refs {
		r, err := s.row(ctx, q, ref.SID)
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
func (s *Store) CheckLiveMany(ctx context.Context, q interface {
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
			args = append(args, s.BucketOf(r.SID), r.SID[:])
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
// The caller commits tx and then calls Purge and RekeyBucket; other nodes
// sharing the database purge the subject when tx commits (Follow).
func (s *Store) ForgetTx(ctx context.Context, tx *storage.Tx, sid envelope.SID) (uint32, error) {
	now := s.now().UnixNano()
	r, err := s.row(ctx, tx, sid)
	if err != nil {
		return 0, err
	}
	switch r.state {
	case SubjectUnknown:
		_, err = tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, created_at, forgotten_at) VALUES (?, 0, ?, ?, ?, ?)`,
			sid[:], SubjectForgotten, s.BucketOf(sid), now, now)
	default:
		_, err = tx.ExecContext(ctx, `UPDATE subjects SET state=?, wrapped=NULL, bucket_gen=NULL, forgotten_at=coalesce(forgotten_at, ?) WHERE bucket=? AND sid=?`,
			SubjectForgotten, now, r.bucket, sid[:])
	}
	if err != nil {
		return 0, fmt.Errorf("keystore: forget: %w", err)
	}
	if err := s.evictTx(ctx, tx, sid, now); err != nil {
		return 0, fmt.Errorf("keystore: forget: %w", err)
	}
	return r.gen, nil
}

// rekeyChunk is the number of subject keys one re-key transaction
// rewraps: the write lock is free between chunks, so a forget's commit
// waits for one chunk, not for the whole bucket (docs/performance.md). The
// subjects of a bucket are adjacent in the table, so a chunk rewrites a
// page or two. Measured at a million subjects (about 244 keys per bucket),
// chunks of 32 gave forgets a lower p99 than chunks of 256 (one chunk per
// bucket), at the price of more fsyncs per re-key.
const rekeyChunk = 32

// RekeyBucket replaces the bucket's key with a fresh one and rewraps the
// bucket's live DEKs under it, so the old bucket key (which may still open a
// forgotten DEK in a backup) exists only wrapped under root versions the next
// epoch destroys. It returns a marker: the forget is shredded once an epoch
// newer than the marker has completed (see EpochAfter).
//
// The work is split so that other writers are never held up for long:
//  1. the new key is committed wrapped by the root store (next_wrapped);
//  2. the subject keys are rewrapped rekeyChunk per transaction, reads
//     meanwhile open either generation (bucketKeys);
//  3. one last transaction rewraps keys created meanwhile and makes the new
//     key the bucket's.
//
// A crash anywhere resumes from the committed state on the next call for
// the bucket (the forget stays not re-keyed until then), and an epoch
// finishes a re-key under way before it rewraps bucket keys.
func (s *Store) RekeyBucket(ctx context.Context, b int) (int64, error) {
	unlock, err := s.lockTree(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	return s.rekeyLocked(ctx, b)
}

// rekeyLocked is RekeyBucket under the tree lock.
func (s *Store) rekeyLocked(ctx context.Context, b int) (int64, error) {
	var oldGen int64
	var oldBlob, nextBlob []byte
	var nextVersion sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT gen, wrapped, next_wrapped, next_version FROM buckets WHERE id=?`, b).
		Scan(&oldGen, &oldBlob, &nextBlob, &nextVersion); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	blobs := [][]byte{oldBlob}
	if nextBlob != nil {
		blobs = append(blobs, nextBlob) // resuming a re-key a crash interrupted
	}
	ks, err := s.root.Unwrap(ctx, blobs)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	old := ks[0]
	defer clear(old)
	var nk []byte
	if nextBlob != nil {
		nk = ks[1]
	} else {
		nk = newKey()
		nw, err := s.root.Wrap(ctx, [][]byte{nk})
		if err != nil {
			return 0, fmt.Errorf("keystore: rekey: %w", err)
		}
		// Relaxed, as the chunks: lost in a crash, the re-key starts over
		// with another next key.
		err = s.db.Bulk(ctx, storage.BulkOptions{Relaxed: true}, func(tx *storage.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE buckets SET next_wrapped=?, next_version=? WHERE id=? AND gen=? AND next_wrapped IS NULL`,
				nw[0].Blob, nw[0].Version, b, oldGen)
			if err != nil {
				return fmt.Errorf("keystore: rekey: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("keystore: rekey: bucket changed concurrently") // cannot happen under treeMu
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		nextBlob, nextVersion = nw[0].Blob, sql.NullInt64{Int64: int64(nw[0].Version), Valid: true}
	}
	defer clear(nk)
	// Reads from now on may meet keys of either generation.
	s.cacheMu.Lock()
	s.purges.Add(1)
	if e, ok := s.bkeys[b]; ok {
		clear(e.key)
		clear(e.next)
	}
	s.bkeys[b] = bucketEntry{gen: oldGen, key: slices.Clone(old), next: slices.Clone(nk), expires: s.now().Add(s.ttl)}
	s.cacheMu.Unlock()

	var after []byte // the last sid rewrapped: the chunks walk the bucket in sid order
	for {
		n, last, err := s.rewrapChunk(ctx, b, oldGen, old, nk, after)
		if err != nil {
			return 0, err
		}
		if n < rekeyChunk {
			break
		}
		after = last
		crashpoint.Hit("rekey:chunk")
	}

	// Keys created behind the walk (still under the old generation), then
	// the switch, in one transaction.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	defer tx.Rollback()
	var gen int64
	if err := tx.QueryRowContext(ctx, `SELECT gen FROM buckets WHERE id=?`, b).Scan(&gen); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if gen != oldGen {
		return 0, fmt.Errorf("keystore: rekey: bucket changed concurrently") // cannot happen under treeMu
	}
	if _, _, err := rewrapIn(ctx, tx, b, oldGen, old, nk, nil, -1); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE buckets SET gen=?, root_version=?, wrapped=?, next_wrapped=NULL, next_version=NULL WHERE id=?`,
		oldGen+1, nextVersion.Int64, nextBlob, b)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("keystore: rekey: %w: the database did not apply bucket %d's new key", ErrReadBack, b)
	}
	var marker int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM epochs`).Scan(&marker); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	s.cacheMu.Lock()
	s.purges.Add(1)
	if e, ok := s.bkeys[b]; ok {
		clear(e.key)
		clear(e.next)
	}
	s.bkeys[b] = bucketEntry{gen: oldGen + 1, key: slices.Clone(nk), expires: s.now().Add(s.ttl)}
	s.cacheMu.Unlock()
	crashpoint.Hit("rekey:committed")
	return marker, nil
}

// rewrapChunk rewraps, in one transaction, up to rekeyChunk live subject
// keys of bucket b still under generation oldGen, with sids after after.
// It returns how many it rewrapped and the last sid.
//
// The chunk's commit does not wait for the disk (storage.BulkOptions
// Relaxed): a crash of the machine may lose it, in order, and the re-key
// then resumes before it; the switch that ends the re-key is durable, and
// makes every chunk before it durable. That saves an fsync per chunk, and
// the write lock is held for the chunk's work alone.
func (s *Store) rewrapChunk(ctx context.Context, b int, oldGen int64, old, nk, after []byte) (int, []byte, error) {
	var n int
	var last []byte
	var inner error
	err := s.db.Bulk(ctx, storage.BulkOptions{Relaxed: true}, func(tx *storage.Tx) error {
		n, last, inner = rewrapIn(ctx, tx, b, oldGen, old, nk, after, rekeyChunk)
		return inner
	})
	if inner != nil {
		return 0, nil, inner
	}
	if err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	return n, last, nil
}

// rewrapIn rewraps in tx the live subject keys of bucket b under generation
// oldGen (old) as generation oldGen+1 (nk): those with sids after after (all
// if nil), at most limit of them (all if negative), in sid order.
func rewrapIn(ctx context.Context, tx *storage.Tx, b int, oldGen int64, old, nk, after []byte, limit int) (int, []byte, error) {
	if after == nil {
		after = []byte{} // below every sid (NULL would match none)
	}
	if limit < 0 {
		limit = math.MaxInt32 // every engine takes a large LIMIT; not all take -1
	}
	rows, err := tx.QueryContext(ctx, `SELECT sid, gen, wrapped FROM subjects
		WHERE bucket=? AND sid > ? AND wrapped IS NOT NULL AND bucket_gen=? ORDER BY bucket, sid LIMIT ?`, b, after, oldGen, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	type rw struct {
		sid  []byte
		blob []byte
	}
	var out []rw
	for rows.Next() {
		var sidb, blob []byte
		var g uint32
		if err := rows.Scan(&sidb, &g, &blob); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
		}
		var sid envelope.SID
		copy(sid[:], sidb)
		dek, err := unwrapDEK(old, blob, dekAAD(sid, g, b, oldGen))
		if err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("keystore: rekey: subject key: %w", err)
		}
		out = append(out, rw{sidb, wrapDEK(nk, dek, dekAAD(sid, g, b, oldGen+1))})
		clear(dek)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	for _, r := range out {
		if _, err := tx.ExecContext(ctx, `UPDATE subjects SET wrapped=?, bucket_gen=? WHERE bucket=? AND sid=?`, r.blob, oldGen+1, b, r.sid); err != nil {
			return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
		}
	}
	if len(out) == 0 {
		return 0, after, nil
	}
	return len(out), out[len(out)-1].sid, nil
}

// BulkCreateKeys creates generation-1 keys for many subjects at once, a
// transaction per bucket batch, skipping subjects that already have a row.
// It is the bulk path of Key, for imports and for filling test data
// directories; it caches nothing. subjects, when not nil, are the raw
// subject ids (subjects[i] is the id whose keyed hash is sids[i]) that the
// Journal commits to in each key_created event; with a Journal they are
// required. They are never stored.
func (s *Store) BulkCreateKeys(ctx context.Context, sids []envelope.SID, subjects []string) error {
	if subjects != nil && len(subjects) != len(sids) {
		return fmt.Errorf("keystore: create keys: %d subject ids for %d sids: %w", len(subjects), len(sids), ErrInvalid)
	}
	subjectOf := func(i int) string {
		if subjects == nil {
			return ""
		}
		return subjects[i]
	}
	if s.kms != nil {
		for i, sid := range sids {
			if _, err := s.createPerSubject(ctx, sid, subjectOf(i), s.purges.Load()); err != nil && !errors.Is(err, ErrShredded) {
				return err
			}
		}
		return nil
	}
	byBucket := map[int][]newSubject{}
	for i, sid := range sids {
		b := s.BucketOf(sid)
		byBucket[b] = append(byBucket[b], newSubject{sid, subjectOf(i)})
	}
	ids := make([]int, 0, len(byBucket))
	for b := range byBucket {
		ids = append(ids, b)
	}
	slices.Sort(ids)
	now := s.now().UnixNano()
	// Consecutive buckets share a transaction of up to createTxRows rows: a
	// commit (an fsync) per bucket would dominate, and a larger transaction
	// would hold the write lock long enough to delay forgets noticeably.
	for i := 0; i < len(ids); {
		j, rows := i, 0
		for j < len(ids) && (j == i || rows+len(byBucket[ids[j]]) <= createTxRows) {
			rows += len(byBucket[ids[j]])
			j++
		}
		if err := s.createChunk(ctx, ids[i:j], byBucket, now); err != nil {
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
func (s *Store) createChunk(ctx context.Context, buckets []int, byBucket map[int][]newSubject, now int64) error {
	for attempt := 0; attempt < 4; attempt++ {
		gens := make([]int64, len(buckets))
		blobs := make([][]byte, len(buckets))
		for i, b := range buckets {
			if err := s.db.QueryRowContext(ctx, `SELECT gen, wrapped FROM buckets WHERE id=?`, b).Scan(&gens[i], &blobs[i]); err != nil {
				return fmt.Errorf("keystore: create keys: %w", err)
			}
		}
		var bks [][]byte
		for i := 0; i < len(blobs); i += batchSize {
			k, err := s.root.Unwrap(ctx, blobs[i:min(i+batchSize, len(blobs))])
			if err != nil {
				return fmt.Errorf("keystore: create keys: %w", err)
			}
			bks = append(bks, k...)
		}
		done, err := s.insertChunk(ctx, buckets, gens, bks, byBucket, now)
		for _, k := range bks {
			clear(k)
		}
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("keystore: create keys: bucket generation keeps changing")
}

func (s *Store) insertChunk(ctx context.Context, buckets []int, gens []int64, bks [][]byte, byBucket map[int][]newSubject, now int64) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
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
				err = s.journalKey(ctx, tx, envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: 1}, Key: dek}, ns.subject)
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
