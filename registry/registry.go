// Package registry is shredd's registry of what exists: the artifacts with
// their kind and holder, the kinds, the decrypt leases, the per-subject
// barrier locks, the registration WAL, the subject hasher and the checks of
// raw subject ids. It owns the tables artifacts, kinds, leases and
// registry_wal: no other package names them in SQL. The derivation graph
// (parents and lineage) is package derivation's: a registration writes its
// graph rows through it in the group commit's transaction, and the reads of
// a forget's cascade that join the graph with the artifacts, kinds and
// leases in one statement take the graph's table names from it. Other
// packages ask its methods; the one fragment it gives is LastSeqSQL, the
// barrier of a forget's commit statement.
//
// Package sealing registers artifacts through it (Queue, after resolving
// their lineage and keys); package erasure reads it for a forget's cascade,
// verification and proof, and takes its barrier locks to commit a forget.
// It may import the root package, envelope, storage, derivation, keystore
// (for the key tree's errors only: the liveness check inside a
// registration's transaction is the Liveness given to Open),
// internal/datadir and internal/crashpoint; never sealing or erasure.
//
// A registration
// holds the read side of its subjects' barrier locks while it checks them
// live and commits, and a forget holds the write side of its subject's
// lock while it commits the barrier, so nothing registered after a forget's
// commit carries the subject.
package registry

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
)

// Options configures a Registry. Zero values take the defaults.
type Options struct {
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Rand is the randomness source for lease ids (crypto/rand by
	// default).
	Rand io.Reader
	// LeaseTTL is how long a decrypt's lease lasts (DefaultLeaseTTL).
	LeaseTTL time.Duration
	// WALDir, when set and the database is not shared by other processes
	// (SQLite), is the folder of the registration WAL (wal.go): the
	// registrations are acknowledged once in it and folded into the tables
	// in the background. Empty: every group of registrations is a
	// database transaction (PostgreSQL, and tests that ask for it).
	WALDir string
	// WALKey authenticates the WAL's frames (WALKey of the subject
	// secret); required with WALDir.
	WALKey []byte
	// SegmentBytes is the size past which the WAL starts a new segment
	// (DefaultSegmentBytes).
	SegmentBytes int64
	// WALRetain bounds the bytes of folded segments the WAL keeps for a
	// restore of the newest backup (DefaultWALRetain).
	WALRetain int64
	// MarkRoot, with WALDir, is the root store that keeps the WAL's
	// high-water mark (mark.go) when it is a keystore.MarkKeeper: the mark
	// is kept at open, while registrations come in, before any segment is
	// removed and at Close. Nil keeps none.
	MarkRoot keystore.RootStore
	// MarkStream names the mark in MarkRoot (StreamFor); "" for
	// MarkStream.
	MarkStream string
	// Logger receives the WAL's warnings (a torn frame cut, registrations
	// a restore cannot replay) and fold errors; nil discards them.
	Logger *slog.Logger
}

// Liveness checks, inside a registration's or a lease's transaction, that
// lineage subjects are live at their generations: the key tree
// (*keystore.Tree) answers it from its tombstones, in the same database.
type Liveness interface {
	// CheckLive returns an error when a ref is not live (keystore's
	// ErrShredded, ErrNotFound, ...), one query per ref.
	CheckLive(ctx context.Context, q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, refs []envelope.Ref) error
	// CheckLiveMany returns the refs that are not live, with their errors,
	// a query per hundred refs.
	CheckLiveMany(ctx context.Context, q interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}, refs []envelope.Ref) (map[envelope.Ref]error, error)
	// ShardOf returns the lock shard of a subject (storage.TxOptions):
	// the registrations and leases of a lineage declare its subjects'.
	ShardOf(sid envelope.SID) int
	// LifeFloors returns, for each of sids ever reinstated, the first key
	// generation of its current life: a forget's cascade reaches the
	// lineage rows of that generation on (the older ones were erased by
	// the forgets before). Subjects never reinstated are absent.
	LifeFloors(ctx context.Context, q storage.Querier, sids []envelope.SID) (map[envelope.SID]uint32, error)
}

// touching returns the declaration of a transaction that checks refs live
// and writes rows under fresh ids (registrations, leases): their
// subjects' shards, shared. Two such transactions never conflict (random
// ids, no counter, no watermark), so they run beside each other; the
// writers of the subjects' state (forgets) declare nothing, so each waits
// for them and they for it: the barrier's order.
func (s *Registry) touching(refs []envelope.Ref) storage.TxOptions {
	o := storage.TxOptions{Shards: make([]int, 0, len(refs))}
	for _, ref := range refs {
		o.Shards = append(o.Shards, s.live.ShardOf(ref.SID))
	}
	return o
}

// Registry is the registry over one database: artifacts, kinds and
// leases, and their derivation graph, written by background group-commit
// writers, and the barrier locks that order registrations against forgets.
type Registry struct {
	db    *storage.DB
	graph *derivation.Graph
	// reads is the live leases by reader, where this process owns the
	// database (lease.go, ReadsOf).
	reads liveReads
	live  Liveness
	opts  Options

	barrier barrier

	leaseQ     chan leaseReq
	recordQ    chan recordReq
	recordDone chan struct{}  // closed when the registration writer returns
	ws         *walState      // the registration WAL; nil without one
	flushKick  chan struct{}  // a group commit happened: checkpoint soon
	stop       chan struct{}  // closed by Close
	background sync.WaitGroup // the lease writer, the pageFlusher and the settler: Close waits for them
	closeOnce  sync.Once
	closeMu    sync.RWMutex // held shared while queueing a request; Close takes it to close the queues
	closed     bool
}

// Open opens the registry in db, whose schema storage made, and starts its
// background writers, pageFlusher and settler (Close stops them). live
// checks lineage subjects inside the writers' transactions.
func Open(ctx context.Context, db *storage.DB, live Liveness, opts Options) (*Registry, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	s := &Registry{db: db, graph: derivation.New(db), live: live, opts: opts, leaseQ: make(chan leaseReq, 1024),
		recordQ: make(chan recordReq, 1024), recordDone: make(chan struct{}), flushKick: make(chan struct{}, 1), stop: make(chan struct{})}
	if opts.WALDir != "" && !db.Shared() {
		if err := openWALState(ctx, s); err != nil {
			return nil, err
		}
	}
	if !db.Shared() {
		if err := s.reads.load(ctx, db, opts.Now().UnixNano()); err != nil {
			return nil, err
		}
	}
	go s.recordWriter()
	for _, run := range []func(){s.leaseWriter, s.pageFlusher, s.settleLoop} {
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			run()
		}()
	}
	return s, nil
}

// Close stops the background lease and registration writers once they
// have answered what was queued, and the pageFlusher and the settler (a
// settle under way is cancelled: it commits nothing then), and returns
// once none of them uses the database; with a registration WAL it folds
// what is left (what it cannot fold stays in the WAL for the next Open).
// Calls after Close that need a lease or a registration fail with
// ErrUnavailable.
func (s *Registry) Close() {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		close(s.leaseQ)
		close(s.recordQ)
		close(s.stop)
		s.closeMu.Unlock()
		<-s.recordDone
		if s.ws != nil {
			s.ws.close()
		}
		s.background.Wait()
	})
}

func (s *Registry) newID() (shredd.ID, error) { return shredd.NewID(s.opts.Now(), s.opts.Rand) }

// barrier is the per-subject locks that order registrations against
// forgets: a registration holds the read side of every subject of its
// lineage while it checks the subjects are live and commits, and a forget
// holds the write side of its subject while it commits the barrier, so
// that nothing registered after a forget's commit can carry the subject.
// Subjects share 4096 stripes.
type barrier struct{ stripes [4096]sync.RWMutex }

// stripe returns the barrier lock index of a subject.
func stripe(sid envelope.SID) int { return int(binary.BigEndian.Uint16(sid[:2]) % 4096) }

// LockSubject takes the write side of sid's barrier lock (a forget's
// commit) and returns the unlock.
func (s *Registry) LockSubject(sid envelope.SID) func() {
	mu := &s.barrier.stripes[stripe(sid)]
	mu.Lock()
	if s.ws != nil {
		s.ws.forgetLive(sid) // the forget may tombstone it: ask the database again
	}
	return mu.Unlock
}

// RLockSubjects takes the read side of the barrier locks of every sid (a
// registration or a decrypt), in ascending order so that concurrent
// callers cannot deadlock, and returns the unlock.
func (s *Registry) RLockSubjects(sids []envelope.SID) func() {
	idx := make([]int, 0, len(sids))
	for _, sid := range sids {
		idx = append(idx, stripe(sid))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.barrier.stripes[i].RLock()
	}
	return func() {
		for _, i := range idx {
			s.barrier.stripes[i].RUnlock()
		}
	}
}

// MapKeyErr turns key tree errors into the domain's errors.
func MapKeyErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, keystore.ErrShredded), errors.Is(err, keystore.ErrVersionDestroyed):
		// A key under a destroyed root version (a database restored from
		// before an epoch) is as erased as a deleted one.
		return fmt.Errorf("%w: %w", shredd.ErrShredded, err)
	case errors.Is(err, keystore.ErrNotFound):
		return fmt.Errorf("%w: subject key not found: %w", shredd.ErrEnvelope, err)
	case errors.Is(err, keystore.ErrRootUnavailable):
		return fmt.Errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	return err
}

// Time is the time of a nullable column of Unix nanoseconds (zero for
// NULL), as the registry's tables keep times.
func Time(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}
