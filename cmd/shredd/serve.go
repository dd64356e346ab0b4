package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/internal/netaddr"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/witness"
)

// Program is a parsed `shredd serve`: ParseFlags, then Run, then Close
// (benbjohnson/wtf's cmd/wtfd). What opens the data directory is the
// node's Config; the rest is the HTTP server's and the background work's.
type Program struct {
	node.Config
	Root          string // root store: "local" or "vault"
	SubjectKeys   string // "tree" or "transit" (with Root "vault")
	Vault         vault.Config
	Addr          string
	AllowRemote   bool
	TLSCert       string
	TLSKey        string
	EpochInterval time.Duration
	MaxBody       int64
	MaxRawBody    int64
	DebugAddr     string // loopback address of the pprof listener; "" for none
	BackupDir     string // where a backup is written after every epoch; "" for none
	BackupKeep    int    // how many of those backups to keep
	// Witnesses are the --witness URL=VKEY values: the witnesses each new
	// checkpoint is sent to (witness.go); WitnessInterval how often the log
	// is looked at for one.
	Witnesses       stringList
	WitnessInterval time.Duration

	// Set by Run, released by Close.
	node       *node.Node
	srv        *http.Server
	debug      *http.Server
	stopped    chan struct{} // closed when srv.Serve returned, serveErr set
	serveErr   error
	stopFollow context.CancelFunc
	followDone chan struct{}
	stopWork   context.CancelFunc
	workDone   chan struct{}
	backupDone chan struct{}

	witnessTargets []witness.Target
	stopWitness    func()
}

// serveCmd runs `shredd serve` until ctx ends or the server fails, then
// shuts it down gracefully: in-flight requests finish, the background
// work stops, the data directory closes.
func serveCmd(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) int {
	p, err := ParseFlags(args, stderr, getenv)
	if err != nil {
		return 2
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	gcDone := startGCTuner(gcCtx, getenv)
	defer func() { stopGC(); <-gcDone }()
	if err := p.Run(ctx); err != nil {
		p.Close()
		fmt.Fprintln(stderr, "shredd:", err)
		return 1
	}
	select {
	case <-ctx.Done():
	case <-p.stopped:
	}
	if err := p.Close(); err != nil {
		fmt.Fprintln(stderr, "shredd:", err)
		return 1
	}
	return 0
}

// envName is the environment variable of a flag of shredd serve.
func envName(flag string) string {
	return "SHREDD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ParseFlags parses the flags of `shredd serve`. Each flag has an environment
// variable (SHREDD_ + the flag name in upper case with _ for -) that sets its
// default.
func ParseFlags(args []string, stderr io.Writer, getenv func(string) string) (*Program, error) {
	p := &Program{}
	p.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	fl := flag.NewFlagSet("shredd serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := &serveFlags{fl: fl, getenv: getenv}
	v := p.defineFlags(sf)
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if len(sf.envErrs) > 0 {
		fmt.Fprintf(stderr, "shredd serve: %s\n", strings.Join(sf.envErrs, "; "))
		return nil, errors.New("bad environment variable")
	}
	if (p.TLSCert == "") != (p.TLSKey == "") {
		fmt.Fprintln(stderr, "shredd serve: --tls-cert and --tls-key go together")
		return nil, errors.New("incomplete tls config")
	}
	if err := p.checkRoot(stderr, getenv, *v.tokenFile, *v.secretIDFile); err != nil {
		return nil, err
	}
	if p.SubjectKeys != "tree" && (p.SubjectKeys != "transit" || p.Root != "vault") {
		fmt.Fprintln(stderr, "shredd serve: --subject-keys must be tree, or transit together with --root vault")
		return nil, errors.New("bad subject-keys")
	}
	if p.DebugAddr != "" && !netaddr.IsLoopback(p.DebugAddr) {
		fmt.Fprintln(stderr, "shredd serve: --debug-addr must be a loopback address")
		return nil, errors.New("bad debug addr")
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "shredd serve: unexpected argument %q\n", fl.Arg(0))
		return nil, errors.New("unexpected argument")
	}
	p.EpochInterval, p.CacheTTL, p.ForgetDeadline, p.LeaseTTL, p.StoreTimeout = *v.epoch, *v.ttl, *v.deadline, *v.leaseTTL, *v.storeTimeout
	if p.Store != "" && !node.IsPostgres(p.Store) {
		fmt.Fprintln(stderr, "shredd serve: --store must be a postgres:// or postgresql:// URL, or empty for SQLite in the data directory")
		return nil, errors.New("bad flag value")
	}
	if p.WitnessInterval = *v.witnessInterval; p.WitnessInterval <= 0 {
		fmt.Fprintln(stderr, "shredd serve: --witness-interval must be > 0")
		return nil, errors.New("bad flag value")
	}
	if len(p.Witnesses) == 0 { // the flags win over the environment
		p.Witnesses = strings.Fields(sf.env("witness", ""))
	}
	var err error
	if p.witnessTargets, err = parseWitnessTargets(p.Witnesses); err != nil {
		fmt.Fprintf(stderr, "shredd serve: %v\n", err)
		return nil, err
	}
	if !p.inRange() {
		fmt.Fprintln(stderr, "shredd serve: --epoch-interval and --store-timeout must be >= 1s, --cache-ttl >= 0, --forget-deadline and --lease-ttl > 0, --buckets >= 1, --backup-keep >= 1, --max-body and --max-raw-body >= 1024")
		return nil, errors.New("bad flag value")
	}
	return p, nil
}

// serveFlags defines the flags of shredd serve, each with its environment
// variable (envName) as its default.
type serveFlags struct {
	fl     *flag.FlagSet
	getenv func(string) string
	// envErrs are the environment variables that do not parse: they are
	// refused, as the flag would be, rather than silently replaced by the
	// default.
	envErrs []string
}

// env returns the flag name's environment variable, or def when it is
// empty.
func (sf *serveFlags) env(name, def string) string {
	if v := sf.getenv(envName(name)); v != "" {
		return v
	}
	return def
}

// dur defines a duration flag.
func (sf *serveFlags) dur(name string, def time.Duration, usage string) *time.Duration {
	d := new(time.Duration)
	v, err := time.ParseDuration(sf.env(name, def.String()))
	if err != nil {
		sf.envErrs = append(sf.envErrs, envName(name)+" is not a duration")
		v = def
	}
	sf.fl.DurationVar(d, name, v, usage)
	return d
}

// num returns the default of a whole-number flag.
func (sf *serveFlags) num(name string, def int64) int64 {
	v, err := strconv.ParseInt(sf.env(name, strconv.FormatInt(def, 10)), 10, 64)
	if err != nil {
		sf.envErrs = append(sf.envErrs, envName(name)+" is not a whole number")
		return def
	}
	return v
}

// serveFlagValues are the flags of shredd serve that ParseFlags checks
// before they go into the Program, or that name files to read.
type serveFlagValues struct {
	epoch, ttl, deadline, leaseTTL, witnessInterval, storeTimeout *time.Duration
	tokenFile, secretIDFile                                       *string
}

// defineFlags defines the flags of shredd serve: into p, or into the
// values it returns.
func (p *Program) defineFlags(sf *serveFlags) *serveFlagValues {
	fl := sf.fl
	v := &serveFlagValues{}
	fl.StringVar(&p.DataDir, "data-dir", sf.env("data-dir", "./shredd-data"), "data directory (database, local root key, secrets); created 0700")
	fl.StringVar(&p.Store, "store", sf.env("store", ""), "the database: empty for SQLite in the data directory, or a postgres:// URL shared by many nodes (docs/scale-out.md); a password in it is better given in PGPASSWORD or ~/.pgpass")
	fl.StringVar(&p.Addr, "addr", sf.env("addr", "127.0.0.1:7750"), "listen address")
	fl.StringVar(&p.TLSCert, "tls-cert", sf.env("tls-cert", ""), "PEM certificate (chain) to serve HTTPS; needs --tls-key")
	fl.StringVar(&p.TLSKey, "tls-key", sf.env("tls-key", ""), "PEM private key of --tls-cert")
	fl.BoolVar(&p.AllowRemote, "allow-remote-http", sf.env("allow-remote-http", "") == "true", "allow plain HTTP on a non-loopback address (put TLS in front)")
	v.epoch = sf.dur("epoch-interval", time.Hour, "how often a root epoch runs while forgets wait for one")
	v.ttl = sf.dur("cache-ttl", keystore.DefaultCacheTTL, "how long unwrapped keys stay cached in memory (part of T_prop)")
	v.deadline = sf.dur("forget-deadline", erasure.DefaultDeadline, "time after a forget is requested by which it must be erased, else overdue")
	v.storeTimeout = sf.dur("store-timeout", node.DefaultStoreTimeout, "with --store postgres://: how long a request waits for the database before it answers 503 backend_unavailable")
	v.leaseTTL = sf.dur("lease-ttl", registry.DefaultLeaseTTL, "how long a decrypt's lease lasts unless released; a forget waits for leases issued before it")
	fl.IntVar(&p.Buckets, "buckets", int(sf.num("buckets", keystore.DefaultBuckets)), "number of bucket keys; fixed when the data directory is created")
	fl.Int64Var(&p.MaxBody, "max-body", sf.num("max-body", api.DefaultMaxBody), "maximum request body in bytes")
	fl.Int64Var(&p.MaxRawBody, "max-raw-body", sf.num("max-raw-body", api.DefaultMaxRawBody), "maximum request body in bytes of the raw-body routes (POST /v1/encrypt/raw, /v1/decrypt/raw)")
	fl.StringVar(&p.DebugAddr, "debug-addr", sf.env("debug-addr", ""), "loopback address to serve Go's pprof profiles on (/debug/pprof/, no token: keep it on loopback); empty for none")
	fl.StringVar(&p.ForgetLedger, "forget-ledger", sf.env("forget-ledger", ""), "the forget ledger: every committed forget, outside the database, so that a restored database re-applies later forgets (default DATA_DIR/forgets.ledger; never restore it from a backup)")
	fl.StringVar(&p.BackupDir, "backup-dir", sf.env("backup-dir", ""), "write a backup of the database here after every root epoch (see shredd backup); empty for none")
	fl.IntVar(&p.BackupKeep, "backup-keep", int(sf.num("backup-keep", 7)), "how many backups of --backup-dir to keep (the oldest are removed)")
	fl.Var(&p.Witnesses, "witness", "URL=VKEY: send each new checkpoint of the log to the C2SP tlog-witness at URL, whose cosignature/v1 verifier key (or a file holding it) is VKEY, and staple its cosignatures (repeat for each witness; SHREDD_WITNESS: space-separated)")
	v.witnessInterval = sf.dur("witness-interval", time.Second, "how often the log is looked at for a new checkpoint to send to the witnesses")
	fl.StringVar(&p.Root, "root", sf.env("root", "local"), "root store: local (a root key file in the data dir) or vault (a Vault Transit key)")
	fl.StringVar(&p.SubjectKeys, "subject-keys", sf.env("subject-keys", "tree"), "where subject keys live: tree (wrapped under bucket keys, erased by re-key and epoch) or transit (one Vault Transit key per subject, deleted at forget; needs --root vault); fixed when the data dir is created")
	// Vault settings take Vault's own environment variables as defaults. The
	// token is read from VAULT_TOKEN or a file, never from a flag value
	// (command lines are visible to other users).
	fl.StringVar(&p.Vault.Address, "vault-addr", sf.getenv("VAULT_ADDR"), "Vault address (VAULT_ADDR); for a Vault cluster, every node's address, comma-separated")
	fl.StringVar(&p.Vault.Namespace, "vault-namespace", sf.getenv("VAULT_NAMESPACE"), "Vault namespace (VAULT_NAMESPACE)")
	fl.StringVar(&p.Vault.CACert, "vault-cacert", sf.getenv("VAULT_CACERT"), "PEM file of the CA of Vault's TLS certificate (VAULT_CACERT)")
	fl.StringVar(&p.Vault.Mount, "vault-transit-mount", sf.env("vault-transit-mount", "transit"), "Transit mount path")
	fl.StringVar(&p.Vault.Key, "vault-key", sf.env("vault-key", "shredd-root"), "Transit key name of the root (names nothing about subjects)")
	fl.StringVar(&p.Vault.HeadMount, "vault-kv-mount", sf.env("vault-kv-mount", "secret"), "KV version 2 mount where shredd keeps, beside the Transit key, the forget records, the registration WAL's mark, the shared secrets and the key's owner")
	v.tokenFile = fl.String("vault-token-file", sf.env("vault-token-file", ""), "file holding the Vault token (default: VAULT_TOKEN)")
	fl.StringVar(&p.Vault.RoleID, "vault-approle-role-id", sf.env("vault-approle-role-id", ""), "AppRole role id: log in with AppRole instead of a token")
	v.secretIDFile = fl.String("vault-approle-secret-id-file", sf.env("vault-approle-secret-id-file", ""), "file holding the AppRole secret id")
	fl.StringVar(&p.Vault.AppRoleMount, "vault-approle-mount", sf.env("vault-approle-mount", "approle"), "AppRole auth mount path")
	return v
}

// checkRoot checks the root store's flags; for --root vault it reads the
// Vault token (VAULT_TOKEN, --vault-token-file) and the AppRole secret id.
func (p *Program) checkRoot(stderr io.Writer, getenv func(string) string, tokenFile, secretIDFile string) error {
	switch p.Root {
	case "local":
	case "vault":
		p.Vault.Token = getenv("VAULT_TOKEN")
		for _, f := range []struct {
			path string
			dst  *string
		}{{tokenFile, &p.Vault.Token}, {secretIDFile, &p.Vault.SecretID}} {
			if f.path == "" {
				continue
			}
			b, err := os.ReadFile(f.path)
			if err != nil {
				fmt.Fprintf(stderr, "shredd serve: %v\n", err)
				return err
			}
			*f.dst = strings.TrimSpace(string(b))
		}
		if p.Vault.Address == "" || (p.Vault.Token == "" && p.Vault.RoleID == "") {
			fmt.Fprintln(stderr, "shredd serve: --root vault needs --vault-addr (VAULT_ADDR) and a token (VAULT_TOKEN, --vault-token-file) or --vault-approle-role-id")
			return errors.New("incomplete vault config")
		}
	default:
		fmt.Fprintf(stderr, "shredd serve: --root must be local or vault, not %q\n", p.Root)
		return errors.New("bad root")
	}
	return nil
}

// inRange reports whether the durations and sizes are within their
// bounds.
func (p *Program) inRange() bool {
	return p.EpochInterval >= time.Second && p.StoreTimeout >= time.Second && p.CacheTTL >= 0 && p.ForgetDeadline > 0 && p.LeaseTTL > 0 &&
		p.Buckets >= 1 && p.BackupKeep >= 1 && p.MaxBody >= 1024 && p.MaxRawBody >= 1024
}

// Run opens the data directory (node.Open) and serves it: the HTTP
// server, the pprof listener with --debug-addr, and the background work
// (epochs, re-keys, backups). It returns once the server listens; Close
// stops it all. After an error, Close releases what Run opened.
func (p *Program) Run(ctx context.Context) (err error) {
	tlsConfig, err := p.tlsConfig()
	if err != nil {
		return err
	}
	backups := make(chan struct{}, 1)
	cfg := p.Config
	cfg.OpenRoot = p.openRoot
	cfg.SharedRoot = p.Root == "vault"
	cfg.AfterEpoch = func() {
		select {
		case backups <- struct{}{}:
		default:
		}
	}
	if p.node, err = node.Open(ctx, cfg); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			p.Logger.Info("stopped before serving", "reason", err.Error())
			return nil
		}
		return err
	}
	if err := p.follow(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return err
	}
	if err := p.startDebug(); err != nil {
		ln.Close()
		return err
	}
	p.startWork(ctx, backups)
	p.startWitnesses(ctx)
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsConfig)
	}
	p.srv = p.newServer(tlsConfig)
	store := "sqlite"
	if p.Store != "" {
		store = "postgres" // never the URL: it may hold a password
	}
	p.Logger.Info("listening", "addr", ln.Addr().String(), "scheme", scheme, "data_dir", p.DataDir, "store", store, "root_store", p.node.Root.Kind())
	p.stopped = make(chan struct{})
	go func() {
		defer close(p.stopped)
		p.serveErr = p.srv.Serve(ln)
	}()
	return nil
}

// Close shuts the server down gracefully (in-flight requests get 15 s),
// stops the background work and waits for it, closes the pprof listener,
// then the node. It returns the server's error when it stopped serving on
// its own, else the shutdown's.
func (p *Program) Close() error {
	var err error
	if p.stopped != nil {
		select {
		case <-p.stopped:
			err = p.serveErr
		default:
			p.Logger.Info("shutting down")
			shCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err = p.srv.Shutdown(shCtx)
			cancel()
		}
	}
	if p.stopWork != nil {
		p.stopWork()
		<-p.workDone
		<-p.backupDone
	}
	p.stopWitnesses()
	if p.stopFollow != nil {
		p.stopFollow()
		<-p.followDone
	}
	if p.debug != nil {
		p.debug.Close()
	}
	if p.node != nil {
		p.node.Close()
	}
	return err
}

// follow starts the key cache's follower (keystore.Store.Follow): where
// nodes share the database, this node drops the keys other nodes' forgets
// destroy and records itself in table nodes; it serves only once recorded.
func (p *Program) follow(ctx context.Context) error {
	id := p.node.ID
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopFollow, p.followDone = stop, make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(p.followDone)
		keystore.NewFollower(p.node.Keys).Follow(fctx, id, p.Logger, func() { close(ready) })
	}()
	select {
	case <-ready:
		if p.node.DB.Shared() {
			p.Logger.Info("node recorded", "node", id)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("the node could not record itself in the database within 30 s")
	}
}

// tlsConfig loads --tls-cert and --tls-key; nil for plain HTTP, which is
// refused on a non-loopback address without --allow-remote-http.
func (p *Program) tlsConfig() (*tls.Config, error) {
	if p.TLSCert == "" && !p.AllowRemote && !netaddr.IsLoopback(p.Addr) {
		return nil, fmt.Errorf("refusing plain HTTP on non-loopback address %s (use --tls-cert/--tls-key, or --allow-remote-http behind a TLS proxy)", p.Addr)
	}
	if p.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(p.TLSCert, p.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// newServer is the API server of the node, with its timeouts and limits.
func (p *Program) newServer(tlsConfig *tls.Config) *http.Server {
	n := p.node
	root, keys := apiProbes(n)
	metrics := api.NewMetrics(n.Service, keys)
	metrics.Log = p.Logger
	h := api.New(api.Config{Service: n.Service, Evidence: n.Evidence, Root: root, Log: p.Logger, Tokens: n.Tokens, Failures: storage.Failures{}, Metrics: metrics,
		MaxBody: p.MaxBody, MaxRawBody: p.MaxRawBody, Disks: p.disks(), Writes: n, Fence: n}).Handler()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.Logger.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}
}

// disks are the directories the server writes to, which GET /readyz
// probes: the data directory, the forget ledger's directory (--forget-ledger
// may put it on another volume) and --backup-dir when set.
func (p *Program) disks() []api.Disk {
	d := []api.Disk{{Name: "data", Dir: p.DataDir}, {Name: "ledger", Dir: filepath.Dir(p.Config.LedgerPath())}}
	if p.BackupDir != "" {
		// Made now rather than at the first epoch's backup, so that the
		// probe finds it; one that cannot be made answers not ready.
		_ = datadir.Prepare(p.BackupDir)
		d = append(d, api.Disk{Name: "backups", Dir: p.BackupDir})
	}
	return d
}

// startDebug serves Go's pprof profiles on --debug-addr, when set.
func (p *Program) startDebug() error {
	if p.DebugAddr == "" {
		return nil
	}
	dln, err := net.Listen("tcp", p.DebugAddr)
	if err != nil {
		return fmt.Errorf("debug listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	p.debug = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.debug.Serve(dln) }()
	p.Logger.Info("pprof listening", "addr", dln.Addr().String())
	return nil
}

// startWork starts the background work: the service's epochs and re-keys
// (reconciling at once, not at the first tick), and what follows each
// epoch (afterEpochs). It outlives ctx until Close, so that a shutdown
// lets in-flight requests finish first.
func (p *Program) startWork(ctx context.Context, backups <-chan struct{}) {
	n := p.node
	workCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopWork, p.workDone, p.backupDone = stop, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.backupDone)
		p.afterEpochs(workCtx, backups, n.DB, n.Keys, n.Eraser, n.Root.Kind(), p.Logger)
	}()
	n.Eraser.Kick()
	go func() {
		defer close(p.workDone)
		n.Eraser.Run(workCtx, p.EpochInterval, p.Logger)
	}()
}

// openRoot opens the root store --root names (node.RootOpener): the local
// root file of the data directory, or the Vault Transit key, with the Vault
// subject keys under --subject-keys transit. Vault down at start-up is not
// an error: the node serves, failing closed (503) until it answers, so
// that forgets still commit; a key that defeats shredding stops the start.
func (p *Program) openRoot(ctx context.Context, dir string, log *slog.Logger) (node.Root, error) {
	if p.Root != "vault" {
		ls, err := local.OpenBeside(filepath.Join(dir, node.RootFile), filepath.Join(dir, node.DBFile))
		if err != nil {
			return node.Root{}, err
		}
		return node.Root{Store: ls}, nil
	}
	vs, err := vault.New(p.Vault)
	if err != nil {
		return node.Root{}, err
	}
	// A missing key is created only for a data directory (and database)
	// with no data yet: never a new root next to data it cannot open.
	cfg := p.Config
	vs.SetMayCreate(func(ctx context.Context) (bool, error) {
		state, err := node.HasState(ctx, cfg)
		return !state, err
	})
	r := node.Root{Store: vs}
	switch err := vs.Check(ctx); {
	case errors.Is(err, vault.ErrUnsafeKey), errors.Is(err, vault.ErrKeyMissing), errors.Is(err, vault.ErrKVUnusable):
		return node.Root{}, err
	case err != nil:
		r.Down = true
		log.Warn("vault root store unavailable at start-up; failing closed until it answers", "error", err.Error())
	default:
		kc := vs.KeyConfig()
		log.Info("vault root store", "mount", p.Vault.Mount, "key", kc.Name, "latest_version", kc.LatestVersion,
			"min_available_version", kc.MinAvailableVersion, "exportable", kc.Exportable, "allow_plaintext_backup", kc.AllowPlaintextBackup)
	}
	fresh, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.Close = stop
	go vs.KeepTokenFresh(fresh, p.Vault, func(err error) { log.Warn("vault token", "error", err.Error()) })
	if p.SubjectKeys == "transit" {
		r.SubjectKMS = vs.SubjectKeys()
	}
	return r, nil
}
