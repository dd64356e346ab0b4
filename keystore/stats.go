package keystore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/shredd/shredd/envelope"
)

// Root store and subject KMS operations counted by RootErrors.
const (
	opWrap = iota
	opUnwrap
	opRewrap
	opRotate
	opTrim
	opVersions
	opSubjectDataKey // the subject KMS operations come last
	opSubjectDecrypt
	opSubjectDestroy
	opSubjectExists
	numRootOps
)

// rootOpNames are the names RootErrors gives the operations.
var rootOpNames = [numRootOps]string{"wrap", "unwrap", "rewrap", "rotate", "trim", "versions",
	"subject_datakey", "subject_decrypt", "subject_destroy", "subject_exists"}

// treeStats are the counters of a Tree that its cache counters do not
// cover. Every field is atomic: the stats are read by metrics scrapes while
// requests and the background work update them.
type treeStats struct {
	rootErrs [numRootOps]atomic.Uint64

	epochs, epochFailures atomic.Uint64
	epochLast             atomic.Int64 // nanoseconds
}

// countUnavailable counts err against op when it wraps ErrRootUnavailable.
func (st *treeStats) countUnavailable(op int, err error) {
	if err != nil && errors.Is(err, ErrRootUnavailable) {
		st.rootErrs[op].Add(1)
	}
}

// observeEpoch records one RunEpoch call that began at start and ended with
// *err. RunEpoch defers it.
func (st *treeStats) observeEpoch(start time.Time, err *error) {
	if *err != nil {
		st.epochFailures.Add(1)
		return
	}
	st.epochLast.Store(int64(time.Since(start)))
	st.epochs.Add(1)
}

// counted returns root and kms (nil stays nil) with every call counted in
// st.
func (st *treeStats) counted(root RootStore, kms SubjectKMS) (RootStore, SubjectKMS) {
	if root != nil {
		root = countedRoot{root, st}
	}
	if kms != nil {
		kms = countedKMS{kms, st}
	}
	return root, kms
}

// uncounted returns the root store a countedRoot wraps, so that Root hands
// out the store itself (calls made through it are not this Tree's).
func uncounted(root RootStore) RootStore {
	if c, ok := root.(countedRoot); ok {
		return c.RootStore
	}
	return root
}

// countedRoot counts the calls of a RootStore that fail with
// ErrRootUnavailable.
// Kind passes through unchanged.
type countedRoot struct {
	RootStore
	st *treeStats
}

var _ RootStore = countedRoot{}

func (c countedRoot) Wrap(ctx context.Context, keys [][]byte) ([]Wrapped, error) {
	w, err := c.RootStore.Wrap(ctx, keys)
	c.st.countUnavailable(opWrap, err)
	return w, err
}

func (c countedRoot) Unwrap(ctx context.Context, blobs [][]byte) ([][]byte, error) {
	k, err := c.RootStore.Unwrap(ctx, blobs)
	c.st.countUnavailable(opUnwrap, err)
	return k, err
}

func (c countedRoot) Rewrap(ctx context.Context, blobs [][]byte) ([]Wrapped, error) {
	w, err := c.RootStore.Rewrap(ctx, blobs)
	c.st.countUnavailable(opRewrap, err)
	return w, err
}

func (c countedRoot) Rotate(ctx context.Context) (int, error) {
	v, err := c.RootStore.Rotate(ctx)
	c.st.countUnavailable(opRotate, err)
	return v, err
}

func (c countedRoot) Trim(ctx context.Context, minVersion int) ([]int, error) {
	vs, err := c.RootStore.Trim(ctx, minVersion)
	c.st.countUnavailable(opTrim, err)
	return vs, err
}

func (c countedRoot) Versions(ctx context.Context) (Versions, error) {
	v, err := c.RootStore.Versions(ctx)
	c.st.countUnavailable(opVersions, err)
	return v, err
}

// countedKMS counts the calls of a SubjectKMS that fail with ErrRootUnavailable.
type countedKMS struct {
	SubjectKMS
	st *treeStats
}

var _ SubjectKMS = countedKMS{}

func (c countedKMS) DataKey(ctx context.Context, sid envelope.SID) ([]byte, []byte, error) {
	dek, wrapped, err := c.SubjectKMS.DataKey(ctx, sid)
	c.st.countUnavailable(opSubjectDataKey, err)
	return dek, wrapped, err
}

func (c countedKMS) Decrypt(ctx context.Context, sid envelope.SID, wrapped []byte) ([]byte, error) {
	k, err := c.SubjectKMS.Decrypt(ctx, sid, wrapped)
	c.st.countUnavailable(opSubjectDecrypt, err)
	return k, err
}

func (c countedKMS) Destroy(ctx context.Context, sid envelope.SID) error {
	err := c.SubjectKMS.Destroy(ctx, sid)
	c.st.countUnavailable(opSubjectDestroy, err)
	return err
}

func (c countedKMS) Exists(ctx context.Context, sid envelope.SID) (bool, error) {
	ok, err := c.SubjectKMS.Exists(ctx, sid)
	c.st.countUnavailable(opSubjectExists, err)
	return ok, err
}

// Stats reads the counters of a Tree, for metrics: its root store errors,
// its epochs and its key cache. Every counter is atomic; a Stats is safe
// for concurrent use.
type Stats struct {
	t *Tree
}

// NewStats returns the Stats of t.
func NewStats(t *Tree) *Stats { return &Stats{t: t} }

// RootErrors returns, by operation, how many of the calls its Tree made to
// its root store since Open failed with ErrRootUnavailable: "wrap", "unwrap",
// "rewrap", "rotate", "trim", "versions", and in per-subject mode also the
// subject KMS operations "subject_datakey", "subject_decrypt",
// "subject_destroy" and "subject_exists". Calls made for requests and for the
// background work count alike; probes made on the root store directly (such
// as /healthz) do not. Other errors (ErrVersionDestroyed, ErrCorrupt ...) are
// answers of a working backend and are not counted.
func (s *Stats) RootErrors() map[string]uint64 {
	n := opSubjectDataKey
	if s.t.kms != nil {
		n = numRootOps
	}
	out := make(map[string]uint64, n)
	for i := range n {
		out[rootOpNames[i]] = s.t.stats.rootErrs[i].Load()
	}
	return out
}

// EpochCounts returns the counters of the epochs its Tree's Shredders ran
// since Open (not those of earlier processes on the same database: see
// Shredder.LastEpoch): the RunEpoch calls that completed an epoch, those
// that returned an error (the epoch resumes on the next call), and the wall
// time of the last completed one (0 before the first).
func (s *Stats) EpochCounts() (completed, failed uint64, last time.Duration) {
	return s.t.stats.epochs.Load(), s.t.stats.epochFailures.Load(), time.Duration(s.t.stats.epochLast.Load())
}

// Cache returns the number of key cache hits and misses of its Tree so far.
func (s *Stats) Cache() (hits, misses uint64) { return s.t.hits.Load(), s.t.misses.Load() }

// Probe is a root store as a health check asks it: its kind, and the
// version new wraps use. It is what package api's RootProbe asks, with
// Stats its KeyStats, so that the command and the tests pass the same
// two values.
type Probe struct {
	RootStore
}

// LatestVersion asks the root store for its versions and returns the
// latest, with RootStore.Versions' errors.
func (p Probe) LatestVersion(ctx context.Context) (int, error) {
	v, err := p.Versions(ctx)
	return v.Latest, err
}
