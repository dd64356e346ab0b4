// Package erasure is shredd's forget state machine and its proof: the
// barrier a forget commits, the key destruction it drives (bucket re-key,
// root epoch), the holders' purges and signed acks, the verification of
// the five conditions of erasure, the signed attestation, the regulator
// export and the forget ledger. It implements shredd.Eraser over the
// registry that package sealing keeps (docs/design.md, "Forget").
//
// A forget moves requested → committed → shredded → erased. The commit is
// the barrier: it takes the subject's barrier lock (sealing.Barrier), so
// that every later encrypt, decrypt or registration whose lineage contains
// the subject is refused with ErrShredded, also when it races the forget.
package erasure

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/sealing"
	"github.com/shredd/shredd/storage"
)

// Options configures a Service. Zero values take the defaults.
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
	// attestations in the transparency log, and signs the attestations
	// (the key tree logs its own events through the same Journal).
	Journal *journal.Journal
	// Ledger, when set, receives every committed forget before it is
	// answered: the trace that lets a restored database re-apply later
	// forgets (ReconcileLedger).
	Ledger *Ledger
	// AfterEpoch, when set, is called after every completed epoch (from the
	// background work or RunEpoch); it must not block.
	AfterEpoch func()
}

// DefaultDeadline is the default verification deadline of a forget.
const DefaultDeadline = 24 * time.Hour

// Service forgets subjects and proves it, over the database, key tree and
// barrier of a registry, which it embeds: a Service is the whole of what
// the HTTP layer serves (shredd.Service), sealing by the registry's
// methods, erasure by its own.
type Service struct {
	*sealing.Service

	db      *storage.DB
	keys    *keystore.Store
	hasher  *sealing.Hasher
	barrier *sealing.Barrier
	opts    Options

	workMu sync.Mutex // serialises re-keys and epochs (lockWork)
	kick   chan struct{}
}

var (
	_ shredd.Eraser  = (*Service)(nil)
	_ shredd.Service = (*Service)(nil)
)

// New returns the erasure service of the registry reg (its database, key
// tree, subject hasher and barrier).
func New(reg *sealing.Service, opts Options) *Service {
	if opts.Deadline <= 0 {
		opts.Deadline = DefaultDeadline
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	return &Service{Service: reg, db: reg.DB(), keys: reg.Keys(), hasher: reg.Hasher(), barrier: reg.Barrier(), opts: opts, kick: make(chan struct{}, 1)}
}

func (s *Service) newID() (shredd.ID, error) { return shredd.NewID(s.opts.Now(), s.opts.Rand) }

func mapKeyErr(err error) error { return sealing.MapKeyErr(err) }

func checkSubject(subject string) error { return sealing.CheckSubject(subject) }

// lockWork takes workMu and, where nodes share the database, the
// cluster-wide lock of the erasure work: reconciliation, re-keys and
// epochs run on one node at a time, and another node takes over when that
// one dies (the database releases its lock).
func (s *Service) lockWork(ctx context.Context) (func(), error) {
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
