// Package node is the composition root of shredd: it assembles a data
// directory's stack as `shredd serve` runs it, and the test kits build the
// same stack through the same function:
//
//	cmd/shredd      parses the flags into a Config
//	  → node.Open   opens the data directory's parts: the directory and
//	                its lock, the secrets, the root store (the command's
//	                RootOpener), the database and its checks, the
//	                transparency log's journal, the forget ledger
//	  → node.Assemble  wires the key tree, the service and the token
//	                store on those parts
//	    ← testkit/shreddtest.New, which opens its parts in a test's
//	      temporary directory instead
//
// Open then readies the stack for serving (the root check, the ledger's
// reconciliation, the first admin token, the recovery) and Close releases
// it in reverse order; the HTTP server and the background work are
// cmd/shredd's, on top of a Node.
//
// Lighter entry points open less: OpenBulk (what a bulk fill needs, for
// cmd/shredd-bench) and OpenDB (the database alone, for the commands that
// work beside a running server).
package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/translog"
)

// Files in the data directory.
const (
	DBFile     = "shredd.db"
	RootFile   = "root.key"
	SecretFile = "subject.key"
	TokenFile  = "admin.token"
	LedgerFile = "forgets.ledger"
)

// DefaultStoreTimeout is Config.StoreTimeout's default: PostgreSQL's
// postgres.OpTimeout.
const DefaultStoreTimeout = postgres.OpTimeout

// Config is what the flags of shredd serve give the stack.
type Config struct {
	DataDir        string
	Store          string     // the database: "" for SQLite in DataDir, or a postgres:// URL (many nodes)
	OpenRoot       RootOpener // the root store, as the command picked it
	Buckets        int
	CacheTTL       time.Duration
	ForgetDeadline time.Duration
	LeaseTTL       time.Duration
	StoreTimeout   time.Duration // PostgreSQL: bounds each database call and a request's wait for a group commit; 0 for postgres.OpTimeout
	ForgetLedger   string        // the forget ledger's file; "" for forgets.ledger in DataDir
	Logger         *slog.Logger  // nil: nothing is logged
	AfterEpoch     func()        // called after every completed root epoch (erasure.Options.AfterEpoch)
	// SharedRoot says the root store is one every node shares (--root
	// vault). With a shared database (PostgreSQL) it is opened before the
	// secrets, and when it keeps secrets (keystore.SecretKeeper) a node's
	// missing secret files come from it, the first node's are kept with it,
	// and files that differ from it are refused: a node then needs nothing
	// on its disk but what it can lose.
	SharedRoot bool
	// LedgerAcceptLoss lets the start repair a forget ledger whose damaged
	// tail the database cannot account for (shredd ledger repair
	// --accept-loss); without it that start is refused.
	LedgerAcceptLoss bool
}

// LedgerPath is the forget ledger's file: ForgetLedger, or forgets.ledger
// in the data directory.
func (c *Config) LedgerPath() string {
	if c.ForgetLedger != "" {
		return c.ForgetLedger
	}
	return filepath.Join(c.DataDir, LedgerFile)
}

// Node is an open data directory: the stack shredd serve serves.
type Node struct {
	// Stack is the assembled service (Assemble): the database, the root
	// store, the hasher and the journal, the key tree, the service, and
	// the token store (nil from OpenBulk).
	*Stack
	// ID names this process in table nodes: random per start (16 and 8
	// hex digits); the data directory keeps no id of its own.
	ID string

	ledger     *ledger.Lines
	closeFuncs []func()
	failFuncs  []func() // undo what a refused start made, after Close
}

// Open assembles the data directory's stack as shredd serve runs it, in
// this order: the directory (created 0700) and its lock, the subject
// secret, the root store, the database with its schema check and the
// secrets' pins, the journal with the attestation and log keys, the
// forget ledger, then Assemble (the key tree, the service, the token
// store), the key tree's root check, the ledger's reconciliation, the
// first admin token, and the recovery of forgets a crash left requested.
// A Vault root store that does not answer is not an error: the node fails
// closed until it does. On error everything opened so far is released.
func Open(ctx context.Context, c Config) (*Node, error) {
	return open(ctx, c, true)
}

// OpenBulk is the lighter entry point of a bulk fill (shredd-bench fill):
// the directory and its lock, the subject secret, the root store, the
// database, the journal, and Assemble's key tree and service, without the
// forget ledger, the token store, the root check or the recovery, none of
// which a fill uses. The server that opens the directory afterwards does
// those.
func OpenBulk(ctx context.Context, c Config) (*Node, error) {
	return open(ctx, c, false)
}

// OpenDB opens only the database, without the lock, the keys or the root
// store: for the commands that work beside a running server (shredd
// token, shredd backup). store is Config.Store. It never creates a SQLite
// database: a directory without one is the os.Stat error
// (fs.ErrNotExist).
func OpenDB(ctx context.Context, dir, store string) (*storage.DB, error) {
	if store != "" {
		return openStore(ctx, dir, store, 0)
	}
	path := filepath.Join(dir, DBFile)
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return sqlite.Open(path)
}

// OpenDBReadOnly is OpenDB for the commands that only read (shredd wal
// check, shredd ledger check): a SQLite database is opened read-only, so
// that not a byte of it changes (opening it for writing sets its journal
// mode); one at an earlier schema version is opened as OpenDB does, which
// migrates it.
func OpenDBReadOnly(ctx context.Context, dir, store string) (*storage.DB, error) {
	if store != "" {
		return OpenDB(ctx, dir, store)
	}
	path := filepath.Join(dir, DBFile)
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, current, err := sqlite.OpenReadOnly(ctx, path)
	if err != nil || current {
		return db, err
	}
	return sqlite.Open(path)
}

// IsPostgres reports whether store names a PostgreSQL database.
func IsPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// openStore opens the database store names: SQLite in dir when "", or
// PostgreSQL.
func openStore(ctx context.Context, dir, store string, timeout time.Duration) (*storage.DB, error) {
	switch {
	case store == "":
		return sqlite.Open(filepath.Join(dir, DBFile))
	case IsPostgres(store):
		return postgres.Open(ctx, store, postgres.Options{OpTimeout: timeout})
	default:
		return nil, errors.New("store: want a postgres:// or postgresql:// URL (or none, for SQLite in the data directory)")
	}
}

func open(ctx context.Context, c Config, full bool) (*Node, error) {
	n := &Node{Stack: &Stack{}} // the parts as they are opened, until Assemble
	if err := n.assemble(ctx, c, full); err != nil {
		n.Close()
		for i := len(n.failFuncs) - 1; i >= 0; i-- {
			n.failFuncs[i]()
		}
		return nil, err
	}
	return n, nil
}

// assemble opens the data directory's parts into n, hands them to
// Assemble and, when full, readies the result for serving; n.Close
// releases what it opened. It runs in two phases: phase one reads and
// checks everything and writes nothing (phaseOne), phase two claims the
// root, pins, folds, migrates, repairs and creates (phaseTwo).
func (n *Node) assemble(ctx context.Context, c Config, full bool) error {
	st := &startup{n: n, c: c, full: full, log: c.Logger}
	if st.log == nil {
		st.log = slog.New(slog.DiscardHandler)
	}
	if err := st.lock(); err != nil {
		return err
	}
	if err := st.openRootAndSecrets(ctx); err != nil {
		return err
	}
	missingPins, err := st.phaseOne(ctx)
	if err != nil {
		return err
	}
	return st.phaseTwo(ctx, missingPins)
}

// startup is one start's state, between the phases of assemble.
type startup struct {
	n        *Node
	c        Config
	full     bool
	log      *slog.Logger
	sec      *secrets
	root     Root
	rootDown bool              // the root store did not answer, and the directory holds no data yet
	stream   string            // the registration WAL's mark in the root store
	walDir   string            // the registration WAL's folder
	pins     map[string]string // the secrets' fingerprints, by pin name
}

// lock locks the data directory by its real path, and names every later
// path by it: a symlink pointed elsewhere while the process runs must not
// move its writes into another directory (which a second process may
// hold).
func (st *startup) lock() error {
	if err := datadir.Prepare(st.c.DataDir); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(st.c.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st.c.DataDir = real
	st.walDir = filepath.Join(real, registry.WALDir)
	return st.n.lockDir(real)
}

// openRoot opens the root store (Config.OpenRoot) into st and n.
func (st *startup) openRoot(ctx context.Context) error {
	r, err := st.c.OpenRoot(ctx, st.c.DataDir, st.log)
	if err != nil {
		return err
	}
	st.root, st.n.Root = r, r.Store
	if r.Close != nil {
		st.n.onClose(r.Close)
	}
	return nil
}

// openRootAndSecrets opens the secrets and the root store, in the order
// that lets a shared root store provide the secrets, and waits for a root
// store that does not answer while the directory holds data.
func (st *startup) openRootAndSecrets(ctx context.Context) error {
	n, c := st.n, st.c
	// The secrets first, and nothing written until it is decided whether
	// the data directory may make the missing ones: never next to state
	// that needs the old ones (docs/operations.md, "What each file is for").
	if c.OpenRoot == nil {
		return errors.New("node: no root store (Config.OpenRoot)")
	}
	// A shared root store first when it may hold the secrets: the node's
	// own root file, never before the secrets are decided.
	var keeper keystore.SecretKeeper
	if c.SharedRoot && c.Store != "" {
		if err := st.openRoot(ctx); err != nil {
			return err
		}
		keeper, _ = n.Root.(keystore.SecretKeeper)
	}
	sec, err := n.openSecrets(ctx, c, st.log, keeper)
	if err != nil {
		return err
	}
	st.sec = sec
	if n.Hasher, err = registry.NewHasher(sec.subject); err != nil {
		return err
	}
	if n.Root == nil {
		if err := st.openRoot(ctx); err != nil {
			return err
		}
	}
	st.rootDown = st.root.Down
	st.stream = registry.StreamFor(n.Root.Kind(), sec.log.Name())
	st.pins = sec.pins(n.Root)
	if !st.rootDown || !st.full {
		return st.checkRootStore(ctx)
	}
	// The start's checks need the root store: a data directory with data
	// is not served before they ran (a database restored from before the
	// last epoch, another root), so the start waits for it.
	state, err := HasState(ctx, c)
	if err != nil || !state {
		return err
	}
	if err := waitRoot(ctx, n.Root, st.log); err != nil {
		return err
	}
	st.rootDown = false
	return st.checkRootStore(ctx)
}

// checkRootStore runs the checks of the root store alone, once it
// answers (they read no database): with Vault, the KV mount and the
// token's capabilities there, and that no other installation owns the key.
func (st *startup) checkRootStore(ctx context.Context) error {
	if !st.full || st.rootDown {
		return nil
	}
	if kv, ok := st.n.Root.(interface{ CheckKV(context.Context) error }); ok {
		if err := kv.CheckKV(ctx); err != nil {
			return err
		}
	}
	return checkOwner(ctx, st.n.Root, st.sec.log.Name())
}

// check runs phase one's checks on db (checkState, the buckets, the
// forget ledger) and returns the pins db lacks.
func (st *startup) check(ctx context.Context, db *storage.DB) (map[string]string, error) {
	missing, err := checkState(ctx, db, st.c.DataDir, st.walDir, st.stream, st.sec, st.n.Root, st.pins, st.full && !st.rootDown, st.log)
	if err == nil {
		err = keystore.CheckBuckets(ctx, db, st.c.Buckets)
	}
	if err == nil && st.full {
		err = erasure.PrecheckLedger(ctx, db, st.c.LedgerPath(), ledger.LinesKey(st.sec.subject), st.n.Root, st.c.LedgerAcceptLoss)
	}
	return missing, err
}

// phaseOne writes nothing: the schema (a planted trigger, view or table
// is refused before anything is written), the secrets' pins, the root's
// versions against the database's, the registration WAL against its mark
// kept with the root, the buckets and the forget ledger. An existing
// SQLite database is checked through a read-only connection first
// (opening it for writing sets its journal mode and migrates it), so that
// a refusal leaves the data directory as it was; then the database is
// opened for writing (and checked there when it could not be read-only:
// new, or of an earlier schema). It returns the pins it lacks.
func (st *startup) phaseOne(ctx context.Context) (map[string]string, error) {
	n, c := st.n, st.c
	var missing map[string]string // the read-only check's, when it ran
	if n.DB == nil && c.Store == "" {
		if err := checkDBPresent(ctx, c.DataDir, n.Root, st.stream); err != nil {
			return nil, err
		}
		path := filepath.Join(c.DataDir, DBFile)
		ro, current, err := sqlite.OpenReadOnly(ctx, path)
		if err == nil && current {
			missing, err = st.check(ctx, ro)
			ro.Close()
			if err != nil {
				return nil, err
			}
		}
		if _, statErr := os.Lstat(path); errors.Is(statErr, fs.ErrNotExist) {
			// A refused start removes the database it made.
			n.onFail(func() {
				for _, suffix := range []string{"", "-wal", "-shm"} {
					os.Remove(path + suffix)
				}
			})
		}
	}
	if n.DB == nil {
		db, err := openStore(ctx, c.DataDir, c.Store, c.StoreTimeout)
		if err != nil {
			return nil, err
		}
		n.DB = db
		n.onClose(func() { db.Close() })
	}
	if st.full && st.rootDown {
		st.log.Warn("root store unavailable at start-up: the database's root versions were not checked")
	}
	if missing != nil {
		return missing, nil // checked read-only: opening it for writing changed nothing the checks read
	}
	return st.check(ctx, n.DB)
}

// phaseTwo makes this process the root's one writer, pins what the
// database lacks, and only then opens the journal and the ledger,
// assembles the stack (which folds the WAL, migrates and creates) and,
// when full, readies it for serving.
func (st *startup) phaseTwo(ctx context.Context, missingPins map[string]string) error {
	n, c, sec := st.n, st.c, st.sec
	if err := claimRoot(n.Root, st.pins, missingPins); err != nil {
		return err
	}
	if !st.rootDown {
		if err := keepOwner(ctx, n.Root, sec.log.Name()); err != nil {
			return err
		}
	}
	if err := n.DB.PinSecrets(ctx, missingPins, time.Now()); err != nil {
		return err
	}
	// A random id per start: nothing in the data directory names the node,
	// so a copied data directory is another node, not the same one twice.
	n.ID = hex.EncodeToString(randomBytes(8)) + "-" + hex.EncodeToString(randomBytes(4))
	if err := checkShared(ctx, n.DB, n.Root); err != nil {
		return err
	}
	journal, err := openJournal(ctx, sec, n.DB)
	if errors.Is(err, translog.ErrOrigin) {
		return fmt.Errorf("%w; the database is another shredd instance's than this data directory's log.key: put back this instance's database (shredd restore refuses another instance's backup), or that instance's log.key with its other secrets", err)
	}
	if err != nil {
		return err
	}
	if st.full {
		if err := st.openLedger(); err != nil {
			return err
		}
	}
	stack, err := Assemble(ctx, Parts{DB: n.DB, Root: n.Root, Hasher: n.Hasher, Journal: journal, Signer: sec.att, Ledger: n.ledger}, Options{
		Keystore: keystore.Options{Buckets: c.Buckets, CacheTTL: c.CacheTTL, SubjectKMS: st.root.SubjectKMS},
		Registry: registry.Options{LeaseTTL: c.LeaseTTL, WALDir: st.walDir,
			WALKey: registry.WALKey(sec.subject), MarkRoot: n.Root, MarkStream: st.stream, Logger: c.Logger},
		Erasure: erasure.Options{Deadline: c.ForgetDeadline, AfterEpoch: c.AfterEpoch, MarkStream: st.stream},
		Tokens:  st.full,
	})
	if err != nil {
		return err
	}
	n.Stack = stack
	n.onClose(stack.Close)
	if !st.full {
		return nil
	}
	n.onClose(func() { n.keepLedgerHead(st.log) })
	if err := n.prepare(ctx, c.DataDir, st.log); err != nil {
		return err
	}
	n.watchFence(st.log)
	return nil
}

// openLedger opens the forget ledger into n (creating it: a start refused
// after this removes the empty ledger it made).
func (st *startup) openLedger() error {
	n, path := st.n, st.c.LedgerPath()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		n.onFail(func() { os.Remove(path) })
	}
	l, err := ledger.OpenLines(path, ledger.LinesKey(st.sec.subject), ledger.Options{
		Fingerprints: st.sec.fingerprints(n.Root), AcceptLoss: st.c.LedgerAcceptLoss})
	if err != nil {
		return err
	}
	n.ledger = l
	n.onClose(func() { l.Close() })
	return nil
}

// openSecrets reads the data directory's secrets and decides, before
// anything is written, whether the missing ones may be made: only in a data
// directory with no state that needs them (no SQLite database, an empty
// forget ledger and, with PostgreSQL, a database with no pins, subjects
// or forgets). With PostgreSQL the database is opened here (n.DB), to ask
// it. The admin token file, when present, must be safe too.
//
// With a root store that keeps the shared secrets (keeper), the files the
// data directory lacks come from it first (fetchShared), and secrets it
// does not keep yet are kept with it (keepShared).
func (n *Node) openSecrets(ctx context.Context, c Config, log *slog.Logger, keeper keystore.SecretKeeper) (*secrets, error) {
	if err := datadir.Check(filepath.Join(c.DataDir, TokenFile), datadir.Secret); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	fetched := false
	if keeper != nil {
		var err error
		if fetched, err = fetchShared(ctx, c.DataDir, keeper, log); err != nil {
			return nil, err
		}
	}
	sec, err := n.readLocalSecrets(ctx, c, log)
	if err != nil || keeper == nil || fetched {
		return sec, err
	}
	if err := keepShared(ctx, c.DataDir, keeper, sec.created, log); err != nil {
		return nil, err
	}
	if len(sec.created) == 0 {
		return sec, nil
	}
	return readSecrets(c.DataDir) // another node's, when it kept its own first
}

// readLocalSecrets is openSecrets without a root store that keeps them.
func (n *Node) readLocalSecrets(ctx context.Context, c Config, log *slog.Logger) (*secrets, error) {
	state, err := localState(c)
	if err != nil {
		return nil, err
	}
	sec, err := readSecrets(c.DataDir)
	if err != nil {
		return nil, err
	}
	missing := sec.missing()
	if len(missing) == 0 {
		// The public half of the attestation key is checked against the
		// private one (or written again when it is missing: a refused
		// start removes it again).
		pub := filepath.Join(c.DataDir, AttestationPubFile)
		if _, err := os.Lstat(pub); errors.Is(err, fs.ErrNotExist) {
			n.onFail(func() { os.Remove(pub) })
		}
		if _, _, err := LoadOrCreateAttestationKey(c.DataDir); err != nil {
			return nil, err
		}
		return sec, nil
	}
	where := "the data directory " + c.DataDir
	if !state && c.Store != "" {
		if n.DB, err = openStore(ctx, c.DataDir, c.Store, c.StoreTimeout); err != nil {
			return nil, err
		}
		n.onClose(func() { n.DB.Close() })
		if state, err = dbState(ctx, n.DB); err != nil {
			return nil, err
		}
		where = "the database"
	}
	if state {
		return nil, refuseMissing(c.DataDir, missing, where)
	}
	// A refused start removes the secrets it made for a data directory
	// that held nothing: nothing was written with them yet.
	n.onFail(func() {
		for _, f := range sec.created {
			os.Remove(filepath.Join(c.DataDir, f))
			switch f {
			case AttestationKeyFile:
				os.Remove(filepath.Join(c.DataDir, AttestationPubFile))
			case LogKeyFile:
				os.Remove(filepath.Join(c.DataDir, LogVKeyFile))
			}
		}
	})
	if err := sec.create(c.DataDir); err != nil {
		return nil, err
	}
	for _, f := range sec.created {
		switch f {
		case AttestationKeyFile:
			log.Info("created the attestation signing key; give its public half to whoever verifies attestations",
				"public_key", filepath.Join(c.DataDir, AttestationPubFile))
		case LogKeyFile:
			log.Info("created the transparency log key; give its verifier key to regulators and log monitors",
				"verifier_key", filepath.Join(c.DataDir, LogVKeyFile), "origin", sec.log.Name())
		case SecretFile:
			log.Info("created the subject secret; keep a copy apart from the database backups: without it no subject id maps to its key",
				"path", filepath.Join(c.DataDir, SecretFile))
		}
	}
	return sec, nil
}

// lockDir prepares the data directory and takes its lock (datadir.LockDir,
// on the directory itself): one process per data directory.
func (n *Node) lockDir(dir string) error {
	if err := datadir.Prepare(dir); err != nil {
		return err
	}
	lock, err := datadir.LockFor(dir, "another shredd process: stop it first; two processes on one data directory would each write the root from their own memory")
	if err != nil {
		return err
	}
	n.onClose(lock.Unlock)
	return nil
}

// Root is an opened root store: what Config.OpenRoot returns.
type Root struct {
	Store      keystore.RootStore
	SubjectKMS keystore.SubjectKMS // per-subject keys (Vault Transit), or nil for the key tree
	Down       bool                // the store did not answer at start-up: the node fails closed until it does
	Close      func()              // releases it (a Vault token's renewal); may be nil
}

// RootOpener opens the root store of the data directory dir. It is the
// command's choice of backend (cmd/shredd: --root local or vault), so that
// this package picks none.
type RootOpener func(ctx context.Context, dir string, log *slog.Logger) (Root, error)

// waitRoot asks the root store until it answers: the start's checks
// that need it run before anything is served. An answer that is not
// "unavailable" (a key that defeats shredding, a missing key next to
// data) stops the start; so does ctx (the server was asked to stop).
func waitRoot(ctx context.Context, root keystore.RootStore, log *slog.Logger) error {
	delay := 2 * time.Second
	for {
		_, err := root.Versions(ctx)
		if err == nil {
			log.Info("the root store answers: going on with the start-up checks")
			return nil
		}
		if !errors.Is(err, keystore.ErrRootUnavailable) {
			return err
		}
		log.Warn("the root store does not answer: the start-up checks need it, so nothing is served until it does (retrying)",
			"retry_in", delay.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("the root store did not answer before the server was stopped (%v): %w", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 15*time.Second)
	}
}

// checkRoot stops the start on a database the root store cannot open (a
// backup older than the last epoch, or a root file older than the
// database), with what to do, instead of answering 410 for everyone. It is
// not asked again when the root store just failed to answer (each try is a
// Vault login, and Vault locks an AppRole out after a few failed ones).
func checkRoot(ctx context.Context, db *storage.DB, root keystore.RootStore, log *slog.Logger) error {
	switch err := keystore.CheckRoot(ctx, db, root); {
	case errors.Is(err, keystore.ErrRootUnavailable):
		log.Warn("root store unavailable at start-up: the database's root versions were not checked", "error", err.Error())
	case err != nil:
		return err
	}
	return nil
}

// checkState runs the start's checks of db that write nothing (phase
// one): the schema, the secrets' pins, with checkRoot the root's versions
// against the database's, and the registration WAL against its mark. It
// returns the pins the database lacks.
func checkState(ctx context.Context, db *storage.DB, dir, walDir, stream string, sec *secrets, root keystore.RootStore, pins map[string]string, checkRootVersions bool, log *slog.Logger) (map[string]string, error) {
	if err := checkSchema(ctx, db); err != nil {
		return nil, err
	}
	missing, err := checkPins(ctx, db, dir, pins, root)
	if err != nil {
		return nil, err
	}
	if checkRootVersions {
		if err := checkRoot(ctx, db, root, log); err != nil {
			return nil, err
		}
	}
	if !db.Shared() {
		if err := registry.CheckWAL(ctx, db, root, stream, walDir, registry.WALKey(sec.subject)); err != nil {
			return nil, err
		}
	}
	return missing, nil
}

// ownedRoot is a root store shared by installations (Vault) that records
// which one owns its key.
type ownedRoot interface {
	Owner(ctx context.Context) (string, error)
	KeepOwner(ctx context.Context, instance string) error
}

// checkOwner refuses a root key another installation owns (another
// transparency log origin): an epoch of either would destroy the root
// versions the other's data needs.
func checkOwner(ctx context.Context, root keystore.RootStore, instance string) error {
	o, ok := root.(ownedRoot)
	if !ok {
		return nil
	}
	owner, err := o.Owner(ctx)
	if err != nil || owner == "" || owner == instance {
		return err
	}
	return fmt.Errorf("the root key %s is used by another shredd installation (%s; this data directory's is %s): an epoch of either would destroy the root versions the other's data needs; nothing was changed. "+
		"Give this data directory its own key (--vault-key), or point it at that installation's database and secrets", root.Describe().Name, owner, instance)
}

// keepOwner records this installation as the root key's owner when none
// is (phase two).
func keepOwner(ctx context.Context, root keystore.RootStore, instance string) error {
	o, ok := root.(ownedRoot)
	if !ok {
		return nil
	}
	owner, err := o.Owner(ctx)
	if err != nil || owner != "" {
		return err
	}
	return o.KeepOwner(ctx, instance)
}

// checkDBPresent refuses to create a new SQLite database in a data
// directory whose root says registrations were acknowledged there (the
// registration WAL's mark): the database was lost, and a new one beside
// the old root and WAL would start with none of its keys, fold what is
// left of the WAL into it and move the WAL on, so that the restore of the
// newest backup that should follow misses the registrations in between.
func checkDBPresent(ctx context.Context, dir string, root keystore.RootStore, stream string) error {
	if _, err := os.Lstat(filepath.Join(dir, DBFile)); !errors.Is(err, fs.ErrNotExist) {
		return nil // present, or refused with its own fix when opened
	}
	m, ok, err := registry.ReadMark(ctx, root, stream)
	if err != nil || !ok || m.Seq == 0 {
		return err
	}
	return fmt.Errorf("the database %s is missing, but the root says this data directory acknowledged %d registrations: nothing was written. "+
		"Restore the newest backup (shredd restore --data-dir %s BACKUP; shredd backup list --dir DIR lists them), then start shredd: the registrations after it are replayed from %s",
		filepath.Join(dir, DBFile), m.Seq, dir, filepath.Join(dir, registry.WALDir))
}

// checkSchema refuses a database whose schema is not exactly what this
// release's migrations make (storage.DB.CheckSchema): one trigger added
// outside shredd can keep a destroyed key alive while forgets report it
// gone, so such a database is never served.
func checkSchema(ctx context.Context, db *storage.DB) error {
	err := db.CheckSchema(ctx)
	if errors.Is(err, storage.ErrSchemaAltered) {
		restore := "restore the newest backup that shredd restore accepts (docs/operations.md, Backups and restores)"
		if db.Shared() {
			// PostgreSQL: its own dumps, not shredd backup and restore.
			restore = "restore the newest dump (pg_dump) taken before the change and after the last epoch (docs/scale-out.md, Backups on PostgreSQL)"
		}
		return fmt.Errorf("%w; something changed the database outside shredd, and such an object can keep destroyed keys alive: %s, or, after reading what the object does, remove it with the engine's own tools", err, restore)
	}
	return err
}

// checkShared refuses a local root file on a database another live node
// uses: every node needs the same root, and an epoch would rotate one
// node's file only. Many nodes share a Vault root store.
// Node ids are random per start, so a node that looks live may be this
// data directory's previous start, killed a moment ago: a node seen is
// only another if it heartbeats again within three heartbeats.
func checkShared(ctx context.Context, db *storage.DB, root keystore.RootStore) error {
	if !db.Shared() || root.Kind() != "local" {
		return nil
	}
	now := time.Now()
	live, err := keystore.LiveNodes(ctx, db, now.Add(-3*keystore.HeartbeatInterval))
	if err != nil || len(live) == 0 {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * keystore.HeartbeatInterval):
	}
	if live, err = keystore.LiveNodes(ctx, db, now); err != nil {
		return err
	}
	if len(live) > 0 {
		return fmt.Errorf("another shredd node (%s) uses this database: many nodes need one shared root store (--root vault), not each a local root file", live[0])
	}
	return nil
}

// prepare readies an assembled stack for serving: the forget ledger's
// reconciliation, the token store's first admin token, and the recovery
// of forgets a crash left requested.
func (n *Node) prepare(ctx context.Context, dir string, log *slog.Logger) error {
	// Forgets the database lacks but the ledger holds (the database was
	// restored from a backup) are committed again before serving.
	rep, err := n.Eraser.Recovery().ReconcileLedger(ctx)
	if err != nil {
		return fmt.Errorf("forget ledger: %w", err)
	}
	if c := rep.Repaired; c != nil {
		log.Warn("the forget ledger was not whole and was repaired: its damaged tail was moved aside and rewritten from the database (docs/operations.md, \"The forget ledger\")",
			"ledger", c.Path, "verdict", c.Summary(), "damaged_lines", len(c.Damaged), "missing_lines", c.Missing,
			"in_database", c.InDB, "reapplied_from_line", c.Reapply, "lost", len(c.Lost)+c.LostUnknown, "damaged_file", rep.DamagedFile)
	}
	if rep.HeadErr != nil {
		log.Warn("the forget ledger's head kept with the root could not be read or written: the ledger was checked without it (docs/operations.md, \"The forget ledger\")", "error", rep.HeadErr.Error())
	}
	if rep.Reapplied > 0 {
		log.Warn("the database lacked forgets of the forget ledger (restored from a backup?): committed them again", "reapplied", rep.Reapplied, "from_root_store_records", rep.FromRecords)
	}
	if rep.RecordsErr != nil {
		log.Warn("the forget records kept with the root store could not be read or written at start-up: the background work retries (docs/scale-out.md, \"Nothing a node must keep\")", "error", rep.RecordsErr.Error())
	}
	if rep.LogRewound {
		log.Warn("the transparency log is shorter than when the forget ledger's last forget was answered: the database was restored from an older copy, and checkpoints handed out above its size do not verify against it (docs/operations.md, Backups and restores)",
			"log_size", rep.LogSize, "ledger_log_size", rep.LedgerLogSize)
	}
	if rep.Recorded > 0 {
		log.Info("recorded committed forgets in the forget ledger", "recorded", rep.Recorded)
	}
	if err := bootstrapAdminToken(ctx, n.Tokens, filepath.Join(dir, TokenFile), log); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	// Forgets a crash left requested are committed before serving; their
	// re-keys, and those of forgets committed before the stop, are the
	// background work's, which starts at once (Eraser.Run reconciles on
	// its first tick).
	if err := n.Eraser.Recover(ctx); err != nil {
		log.Warn("recovery incomplete at start-up; the background work retries", "error", err.Error())
	}
	return nil
}

// keepLedgerHead keeps the forget ledger's head with the root at
// shutdown, so that the next start checks the ledger against all of it.
func (n *Node) keepLedgerHead(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Eraser.Recovery().KeepLedgerHead(ctx); err != nil {
		log.Warn("the forget ledger's head was not kept with the root at shutdown", "error", err.Error())
	}
}

func (n *Node) onClose(f func()) { n.closeFuncs = append(n.closeFuncs, f) }

// WriteErr reports why the node's durable writes fail now (api.WriteProbe):
// the registration WAL or its mark, the forget ledger, or a root file that
// another process changed (fenced); nil while they succeed.
func (n *Node) WriteErr() error {
	if n.Registry != nil {
		if err := n.Registry.WriteErr(); err != nil {
			return err
		}
	}
	if err := n.ledger.WriteErr(); err != nil {
		return err
	}
	return n.FenceErr()
}

// FenceErr reports that this process no longer owns the data directory
// (the local root file changed under it: api.FenceProbe); nil otherwise.
func (n *Node) FenceErr() error {
	if r, ok := n.Root.(interface{ WriteErr() error }); ok {
		return r.WriteErr() // the local root's only write error is its fence
	}
	return nil
}

// fenceInterval is how often the node reads its root file back to find
// out whether another process claimed it.
const fenceInterval = 2 * time.Second

// watchFence reads the root file back every fenceInterval until the node
// closes, so that a process that lost it is fenced even while it writes
// nothing to it.
func (n *Node) watchFence(log *slog.Logger) {
	r, ok := n.Root.(interface{ CheckFence() error })
	if !ok {
		return
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(fenceInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := r.CheckFence(); err != nil {
					log.Error("fenced: another process changed the root file; this process answers 503 to every call from now on", "error", err.Error())
					return
				}
			}
		}
	}()
	n.onClose(func() { close(stop); <-done })
}

func (n *Node) onFail(f func()) { n.failFuncs = append(n.failFuncs, f) }

// Close releases the node in the reverse order of Open: the service, the
// forget ledger, the database, the lock, then the Vault token's renewal.
// The caller stops the work that uses the node first.
func (n *Node) Close() {
	for i := len(n.closeFuncs) - 1; i >= 0; i-- {
		n.closeFuncs[i]()
	}
	n.closeFuncs = nil
}
