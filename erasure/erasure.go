// Package erasure is shredd's forget state machine and its proof: the
// barrier a forget commits, the key destruction it drives (bucket re-key,
// root epoch), the holders' purges and signed acks, the verification of
// the five conditions of erasure, the signed attestation, the regulator
// export and the forget ledger. Three types share one state: Eraser (the
// forgets, their verification, the epochs, the recovery and the ledger)
// implements shredd.Eraser, Holders (the holders, their purges, signed
// acks and inventories) shredd.Holders, and Evidence (the attestation, the
// regulator export and the transparency log) shredd.Evidence
// (docs/design.md, "Forget").
//
// It owns the tables of forgets, holders, acks and inventories, and reads
// what depends on a subject through package registry, whose tables it never
// names in SQL (a statement that joins them with its own takes the
// registry's SQL fragments). It may import the root package, envelope,
// keystore, registry, storage, attest, journal, translog and bundle; never
// sealing.
//
// A forget moves requested → committed → shredded → erased. The commit is
// the barrier: it takes the subject's barrier lock
// (registry.Registry.LockSubject), so that every later encrypt, decrypt or
// registration whose lineage contains the subject is refused with
// ErrShredded, also when it races the forget.
package erasure

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
)

// Options configures an Eraser. Zero values take the defaults.
type Options struct {
	// Deadline is how long after its request a forget must be erased before
	// it is overdue (default 24h).
	Deadline time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Rand is the randomness source for ids and salts (crypto/rand by
	// default).
	Rand io.Reader
	// Journal, when set, logs forget commits, holder acks and erasure
	// attestations in the transparency log, and its Signer signs the
	// attestations (the key tree logs its own events through the same
	// Journal).
	Journal *journal.Journal
	// Signer signs the attestations of a service without a Journal (with
	// one, the Journal's Signer does). Without either, an attestation not
	// signed at erasure gives ErrUnavailable.
	Signer *attest.Signer
	// Ledger, when set, receives every committed forget before it is
	// answered: the trace that lets a restored database re-apply later
	// forgets (ReconcileLedger).
	Ledger *ledger.Lines
	// MarkStream names the registration WAL's mark in the root store
	// (registry.StreamFor): the losses an operator accepted there are
	// stated in every attestation. "" for registry.MarkStream.
	MarkStream string
	// AfterEpoch, when set, is called after every completed epoch (from the
	// background work or RunEpoch); it must not block.
	AfterEpoch func()
}

// DefaultDeadline is the default verification deadline of a forget.
const DefaultDeadline = 24 * time.Hour

// Eraser forgets subjects and verifies it: the barrier, the key
// destruction (bucket re-key, root epoch), the verification of the five
// conditions, the recovery of forgets and the forget ledger. It works over
// the database (its own tables), the registry (what depends on a subject,
// and the barrier locks) and the key tree (the keys it destroys). Its
// Holders and its Evidence (NewHolders, NewEvidence) share its state.
type Eraser struct {
	*core
	workMu sync.Mutex // serialises re-keys and epochs (lockWork)
	group  *committer // commits concurrent forgets together (commit)
	// epochAsked, when set (by tests), runs once a RunEpoch call has read
	// the epoch left running, before it waits for the work lock.
	epochAsked func()
	// rekeyRead, when set (by tests), gets the number of forgets each
	// re-key pass read.
	rekeyRead func(n int)
}

// core is the state an Eraser shares with its Holders and its Evidence,
// and the reads of the holders' tables and the attestation that both
// sides of an erasure need (the verification reads the acks; an erasure
// signs its attestation).
type core struct {
	db     *storage.DB
	reg    *registry.Registry
	keys   *keystore.Tree
	shred  *keystore.Shredder // re-keys, epochs and the read-backs of the key tree's erasure
	follow *keystore.Follower // when every node's cache has let go of a subject's keys
	hasher *registry.Hasher
	opts   Options
	kick   chan struct{} // wakes the background work (wake)
	// probeMu serializes probeUpkeep on this node, so that an ack and the
	// background pass do not both ask a holder's first probes.
	probeMu sync.Mutex
	// records are the forget records kept with the root store, when it
	// keeps them (nil otherwise).
	records *records
	// headPinned: the database pins that the ledger's head is kept with
	// the root (pinHead).
	headPinned atomic.Bool
}

var _ shredd.Eraser = (*Eraser)(nil)

// New returns the eraser over the database db, the registry reg in it, the
// key tree keys and the subject hasher.
func New(db *storage.DB, reg *registry.Registry, keys *keystore.Tree, hasher *registry.Hasher, opts Options) *Eraser {
	if opts.Deadline <= 0 {
		opts.Deadline = DefaultDeadline
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	s := &Eraser{core: &core{db: db, reg: reg, keys: keys, shred: keystore.NewShredder(keys), follow: keystore.NewFollower(keys),
		hasher: hasher, opts: opts, kick: make(chan struct{}, 1), records: newRecords(keys.Root(), opts.Ledger)}}
	s.group = &committer{s: s}
	return s
}

// wake asks the background work to run soon (Eraser.Kick).
func (c *core) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (s *Eraser) newID() (shredd.ID, error) { return shredd.NewID(s.opts.Now(), s.opts.Rand) }

func mapKeyErr(err error) error { return registry.MapKeyErr(err) }

func checkSubject(subject string) error { return registry.CheckSubject(subject) }

// lockWork takes workMu and, where nodes share the database, the
// cluster-wide lock of the erasure work: reconciliation, re-keys and
// epochs run on one node at a time, and another node takes over when that
// one dies (the database releases its lock).
func (s *Eraser) lockWork(ctx context.Context) (func(), error) {
	s.workMu.Lock()
	release, err := s.db.Exclusive(ctx, "erasure.work")
	if err != nil {
		s.workMu.Unlock()
		return nil, fmt.Errorf("erasure: %w: %w", shredd.ErrUnavailable, err)
	}
	return func() {
		release()
		s.workMu.Unlock()
	}, nil
}
