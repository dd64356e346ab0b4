// Package shreddtest builds the real shredd service for tests: a root store
// (a local root file unless one is given), a database (SQLite, or
// PostgreSQL with SHREDD_TEST_STORE=postgres), optionally a transparency
// log and its journal, in a temporary directory, wired into the key tree,
// the registry and the API tokens by the same function that wires
// cmd/shredd serve's stack (node.Assemble, which node.Open calls after
// opening a data directory's parts). Everything it opens is closed with
// t.Cleanup.
//
// It is imported by _test.go files only. Its attestation and log keys are
// testkeys': public, so nothing they sign proves anything.
package shreddtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/sealing"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/translog"
)

// StoreEnv names the storage backend of every Stack and OpenDB: "sqlite"
// (the default: a file in the test's directory) or "postgres" (a database
// of its own on the test binary's PostgreSQL server, pgtest.Shared).
// scripts/test.sh runs the packages built on shreddtest once with each.
const StoreEnv = "SHREDD_TEST_STORE"

// OpenDB opens a new, empty database of the backend StoreEnv names, for
// t: a SQLite file in dir, or a PostgreSQL database dropped when t ends.
func OpenDB(t testing.TB, dir string) (*storage.DB, error) {
	t.Helper()
	switch b := os.Getenv(StoreEnv); b {
	case "", "sqlite":
		return sqlite.Open(filepath.Join(dir, "shredd.db"))
	case "postgres":
		return postgres.Open(context.Background(), pgtest.Shared(t).NewDatabase(t), postgres.Options{})
	default:
		t.Fatalf("%s=%q: want sqlite or postgres", StoreEnv, b)
		return nil, nil
	}
}

// Buckets is the number of bucket keys of the key tree when
// Options.Keystore.Buckets is 0: a few, so that subjects share them.
const Buckets = 8

// Secret is the subject secret of every Stack's Hasher (the tests that
// compute subject ids themselves use Stack.Hasher).
var Secret = bytes.Repeat([]byte{1}, 32)

// Options says how to build a Stack. The zero value is a service on a
// local root file, without a transparency log, on the real clock.
type Options struct {
	// Root is the root store of the key tree (a local root file in Dir
	// when nil).
	Root keystore.RootStore
	// Log wires a transparency log (testkeys.LogKey) in the database and
	// its journal (signed with testkeys.AttestationKey) into the key tree
	// and the registry.
	Log bool
	// Now, when set, is the clock of the key tree, the registry, the
	// sealer and the journal, except where Keystore.Now, Registry.Now or
	// Sealer.Now is set.
	Now func() time.Time
	// Keystore is node.Options.Keystore, with Buckets (Buckets when 0)
	// filled in; node.Assemble fills in Now and Journal.
	Keystore keystore.Options
	// Registry is node.Options.Registry, with WALDir (the registration
	// WAL in Dir, as node.Open has it) and WALKey (of Secret) when empty;
	// node.Assemble fills in Now.
	Registry registry.Options
	// Sealer is node.Options.Sealer; node.Assemble fills in Now.
	Sealer sealing.Options
	// Erasure is node.Options.Erasure, its Ledger node.Parts.Ledger;
	// node.Assemble fills in Now and Journal.
	Erasure erasure.Options
	// Kinds are registered in the registry before New returns.
	Kinds []string
	// AdminToken, when set, is imported into Tokens with the admin scope.
	AdminToken string
}

// Stack is a built service and what it is made of: node.Stack (the
// database, the root store, the hasher, the journal, the key tree, the
// service and the tokens) and what the test needs besides.
type Stack struct {
	*node.Stack
	// Dir is the temporary directory of the root file and the database.
	Dir string
	// Log is the transparency log of the Journal (node.Stack.Journal);
	// both are nil without Options.Log.
	Log *translog.Log
	// LogVKey is the verifier key of Log ("" without Options.Log).
	LogVKey string
	// Signer is the one signer of the journal's events and the erasure's
	// attestations, of testkeys.AttestationKey(0).
	Signer *attest.Signer
}

// New builds a Stack in t.TempDir(); it fails t on any error. The parts
// (the root store, the database, the journal) are opened here, and wired
// by node.Assemble with o mapped onto its options; the tokens keep the
// real clock.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	ctx := context.Background()
	s := &Stack{Dir: t.TempDir()}
	var err error
	if s.Signer, err = attest.NewSigner(testkeys.AttestationKey(0)); err != nil {
		t.Fatal(err)
	}
	p := node.Parts{Root: o.Root, Signer: s.Signer, Ledger: o.Erasure.Ledger}
	if p.Root == nil {
		if p.Root, err = local.Open(filepath.Join(s.Dir, "root.key")); err != nil {
			t.Fatal(err)
		}
	}
	if p.DB, err = OpenDB(t, s.Dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.DB.Close() })
	if o.Log {
		skey, vkey := testkeys.LogKey()
		signer, err := note.NewSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		if s.Log, err = translog.Open(ctx, p.DB, signer); err != nil {
			t.Fatal(err)
		}
		if p.Journal, err = journal.New(s.Log, vkey, s.Signer, o.Now); err != nil {
			t.Fatal(err)
		}
		s.LogVKey = vkey
	}
	if p.Hasher, err = registry.NewHasher(Secret); err != nil {
		t.Fatal(err)
	}
	ko := o.Keystore
	if ko.Buckets == 0 {
		ko.Buckets = Buckets
	}
	ro := o.Registry
	if ro.WALDir == "" {
		ro.WALDir = filepath.Join(s.Dir, registry.WALDir) // as node.Open does (on SQLite)
	}
	if ro.WALKey == nil {
		ro.WALKey = registry.WALKey(Secret)
	}
	if s.Stack, err = node.Assemble(ctx, p, node.Options{Keystore: ko, Registry: ro, Sealer: o.Sealer, Erasure: o.Erasure, Now: o.Now, Tokens: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stack.Close)
	for _, k := range o.Kinds {
		if _, _, err := s.Registry.PutKind(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}
	if o.AdminToken != "" {
		if err := s.Tokens.Import(ctx, "test-admin", []string{access.ScopeAdmin}, sha256.Sum256([]byte(o.AdminToken))); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// LogVerifier returns the verifier of Log's checkpoints.
func (s *Stack) LogVerifier(t testing.TB) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(s.LogVKey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Clock is a test clock that moves only when told (Options.Now: c.Now).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at 2026-12-02 12:00 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// Kinds are the kinds the service tests register (NewService).
var Kinds = []string{"episodic", "summary", "embedding"}

// Service is a Stack's Sealer, Eraser, Holders and Evidence joined, with
// every method of each (shredd.Service and the rest), and its Registry.
type Service struct {
	*sealing.Sealer
	*erasure.Eraser
	*erasure.Holders
	*erasure.Evidence
	Registry *registry.Registry
}

// Both returns the Stack's Sealer, Eraser, Holders, Evidence and Registry
// as one Service.
func (s *Stack) Both() *Service {
	return &Service{Sealer: s.Sealer, Eraser: s.Eraser, Holders: s.Holders, Evidence: s.Evidence, Registry: s.Registry}
}

// NewService is a whole service (Stack.Both), with Kinds registered.
func NewService(t testing.TB) *Service {
	t.Helper()
	return New(t, Options{Kinds: Kinds}).Both()
}

// Seal encrypts pt for src and fails the test on an error.
func Seal(t testing.TB, s shredd.Sealer, src shredd.Source, pt string) shredd.Sealed {
	t.Helper()
	out, err := s.Encrypt(context.Background(), src, []byte(pt), nil)
	if err != nil {
		t.Fatalf("encrypt %s: %v", pt, err)
	}
	return out
}
