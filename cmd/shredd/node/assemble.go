package node

import (
	"context"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/sealing"
	"github.com/shredd/shredd/storage"
)

// Parts are the opened pieces Assemble wires a Stack from. Each caller
// opens them its own way: Open from the data directory (after its lock,
// its secrets, the root store's opener and the database's checks), and
// testkit/shreddtest.New in a test's temporary directory. The caller
// keeps owning them: Stack.Close closes none.
type Parts struct {
	// DB is the database, migrated by its backend.
	DB *storage.DB
	// Root is the root store of the key tree.
	Root keystore.RootStore
	// Hasher maps subject ids to sids under the subject secret.
	Hasher *registry.Hasher
	// Journal is the transparency log's journal that the key tree and
	// the erasure log through; nil for none (tests without a log).
	Journal *journal.Journal
	// Signer is the service's one signer of attestations (the Journal's
	// own when there is one); nil for none (tests that attest nothing).
	Signer *attest.Signer
	// Ledger is the forget ledger; nil for none (a bulk fill, most tests).
	Ledger *ledger.Lines
}

// Options tune what Assemble makes. The zero value is the defaults of
// each package, without a token store.
type Options struct {
	// Keystore is passed to keystore.Open, with Journal set to
	// Parts.Journal and Now, when nil, to Now.
	Keystore keystore.Options
	// Registry is passed to registry.Open, with Now, when nil, set to Now.
	Registry registry.Options
	// Sealer is passed to sealing.New, with Now, when nil, set to Now.
	Sealer sealing.Options
	// Erasure is passed to erasure.New, with Journal, Signer and Ledger
	// set to Parts' and Now, when nil, to Now.
	Erasure erasure.Options
	// Now, when set, is the clock of the key tree, the registry and the
	// erasure, where their own options leave theirs nil.
	Now func() time.Time
	// Tokens opens the API token store (Stack.Tokens). A bulk fill serves
	// nothing and goes without.
	Tokens bool
}

// Stack is an assembled shredd service: the parts it was made of, and
// the key tree, the registry, the sealer and the erasure (the eraser, its
// holders and its evidence) on them, and the token store that Assemble
// made.
type Stack struct {
	DB       *storage.DB
	Root     keystore.RootStore
	Hasher   *registry.Hasher
	Journal  *journal.Journal // nil without a transparency log
	Keys     *keystore.Tree
	Registry *registry.Registry // artifacts, lineage, kinds, leases and the barrier locks
	Sealer   *sealing.Sealer
	Eraser   *erasure.Eraser
	Holders  *erasure.Holders  // the Eraser's holders, acks and inventories
	Evidence *erasure.Evidence // the Eraser's attestations, exports and log
	Service  shredd.Service    // Sealer, Eraser, Holders and Evidence joined (shredd.Join): what the API serves
	Tokens   *access.Tokens    // nil without Options.Tokens

	closeFuncs []func()
}

// Assemble is the composition root of shredd: the one function that
// wires the service from its opened parts, for the server and the tests
// alike.
//
//	cmd/shredd (flags) → node.Open(Config) → node.Assemble(Parts, Options)
//	                     testkit/shreddtest.New ↗
//
// It opens the key tree on the root store, then the registry, the
// sealer and the eraser on both and, with Options.Tokens, the token store. It writes
// nothing to the database; what a server does before serving (the root
// check, the forget ledger's reconciliation, the first admin token, the
// recovery of forgets) is Open's. On error nothing it made is left open.
func Assemble(ctx context.Context, p Parts, o Options) (*Stack, error) {
	ko, ro, so, eo := o.Keystore, o.Registry, o.Sealer, o.Erasure
	ko.Journal, eo.Journal, eo.Signer, eo.Ledger = p.Journal, p.Journal, p.Signer, p.Ledger
	if ko.Now == nil {
		ko.Now = o.Now
	}
	if ro.Now == nil {
		ro.Now = o.Now
	}
	if so.Now == nil {
		so.Now = o.Now
	}
	if eo.Now == nil {
		eo.Now = o.Now
	}
	s := &Stack{DB: p.DB, Root: p.Root, Hasher: p.Hasher, Journal: p.Journal}
	var err error
	// The constructors, one each: the key tree, the registry, the sealer
	// and the eraser on both, the token store.
	if s.Keys, err = keystore.Open(ctx, p.DB, p.Root, ko); err != nil {
		return nil, err
	}
	if s.Registry, err = registry.Open(ctx, p.DB, s.Keys, ro); err != nil {
		return nil, err
	}
	s.closeFuncs = append(s.closeFuncs, s.Registry.Close)
	s.Sealer = sealing.New(s.Registry, s.Keys, p.Hasher, so)
	s.Eraser = erasure.New(p.DB, s.Registry, s.Keys, p.Hasher, eo)
	s.Holders, s.Evidence = erasure.NewHolders(s.Eraser), erasure.NewEvidence(s.Eraser)
	s.Service = shredd.Join(s.Sealer, s.Eraser, s.Holders, s.Evidence, erasure.NewReinstatements(s.Eraser))
	if o.Tokens {
		if s.Tokens, err = access.OpenTokens(ctx, p.DB, nil); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close stops what Assemble started (the registry's background writers),
// in reverse order; the parts stay open. A second call does nothing.
func (s *Stack) Close() {
	for i := len(s.closeFuncs) - 1; i >= 0; i-- {
		s.closeFuncs[i]()
	}
	s.closeFuncs = nil
}
