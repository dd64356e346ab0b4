package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage/sqlite"
)

// Program is a parsed `shredd serve`.
type Program struct {
	DataDir        string
	Addr           string
	AllowRemote    bool
	TLSCert        string
	TLSKey         string
	EpochInterval  time.Duration
	CacheTTL       time.Duration
	ForgetDeadline time.Duration
	LeaseTTL       time.Duration
	Buckets        int
	MaxBody        int64
	MaxRawBody     int64
	Root           string // "local" or "vault"
	SubjectKeys    string // "tree" or "transit"
	DebugAddr      string // loopback address of the pprof listener; "" for none
	ForgetLedger   string // the forget ledger's file; "" for forgets.ledger in DataDir
	BackupDir      string // where a backup is written after every epoch; "" for none
	BackupKeep     int    // how many of those backups to keep
	Vault          vault.Config
}

// Files in the data directory.
const (
	dbFile     = "shredd.db"
	rootFile   = "root.key"
	secretFile = "subject.key"
	tokenFile  = "admin.token"
	lockFile   = "lock"
	ledgerFile = "forgets.ledger"
)

// ledgerPath is the forget ledger's file: --forget-ledger, or
// forgets.ledger in the data directory.
func (p *Program) ledgerPath() string {
	if p.ForgetLedger != "" {
		return p.ForgetLedger
	}
	return filepath.Join(p.DataDir, ledgerFile)
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
	fl := flag.NewFlagSet("shredd serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	env := func(name, def string) string {
		if v := getenv(envName(name)); v != "" {
			return v
		}
		return def
	}
	fl.StringVar(&p.DataDir, "data-dir", env("data-dir", "./shredd-data"), "data directory (database, local root key, secrets); created 0700")
	fl.StringVar(&p.Addr, "addr", env("addr", "127.0.0.1:7750"), "listen address")
	fl.StringVar(&p.TLSCert, "tls-cert", env("tls-cert", ""), "PEM certificate (chain) to serve HTTPS; needs --tls-key")
	fl.StringVar(&p.TLSKey, "tls-key", env("tls-key", ""), "PEM private key of --tls-cert")
	fl.BoolVar(&p.AllowRemote, "allow-remote-http", env("allow-remote-http", "") == "true", "allow plain HTTP on a non-loopback address (put TLS in front)")
	// An environment variable that does not parse is refused, as the flag
	// would be, rather than silently replaced by the default.
	var envErrs []string
	dur := func(name string, def time.Duration, usage string) *time.Duration {
		d := new(time.Duration)
		v, err := time.ParseDuration(env(name, def.String()))
		if err != nil {
			envErrs = append(envErrs, envName(name)+" is not a duration")
			v = def
		}
		fl.DurationVar(d, name, v, usage)
		return d
	}
	num := func(name string, def int64) int64 {
		v, err := strconv.ParseInt(env(name, strconv.FormatInt(def, 10)), 10, 64)
		if err != nil {
			envErrs = append(envErrs, envName(name)+" is not a whole number")
			return def
		}
		return v
	}
	epoch := dur("epoch-interval", time.Hour, "how often a root epoch runs while forgets wait for one")
	ttl := dur("cache-ttl", keystore.DefaultCacheTTL, "how long unwrapped keys stay cached in memory (part of T_prop)")
	deadline := dur("forget-deadline", derivation.DefaultDeadline, "time after a forget is requested by which it must be erased, else overdue")
	leaseTTL := dur("lease-ttl", derivation.DefaultLeaseTTL, "how long a decrypt's lease lasts unless released; a forget waits for leases issued before it")
	fl.IntVar(&p.Buckets, "buckets", int(num("buckets", keystore.DefaultBuckets)), "number of bucket keys; fixed when the data directory is created")
	fl.Int64Var(&p.MaxBody, "max-body", num("max-body", api.DefaultMaxBody), "maximum request body in bytes")
	fl.Int64Var(&p.MaxRawBody, "max-raw-body", num("max-raw-body", api.DefaultMaxRawBody), "maximum request body in bytes of the raw-body routes (POST /v1/encrypt/raw, /v1/decrypt/raw)")
	fl.StringVar(&p.DebugAddr, "debug-addr", env("debug-addr", ""), "loopback address to serve Go's pprof profiles on (/debug/pprof/, no token: keep it on loopback); empty for none")
	fl.StringVar(&p.ForgetLedger, "forget-ledger", env("forget-ledger", ""), "the forget ledger: every committed forget, outside the database, so that a restored database re-applies later forgets (default DATA_DIR/forgets.ledger; never restore it from a backup)")
	fl.StringVar(&p.BackupDir, "backup-dir", env("backup-dir", ""), "write a backup of the database here after every root epoch (see shredd backup); empty for none")
	fl.IntVar(&p.BackupKeep, "backup-keep", int(num("backup-keep", 7)), "how many backups of --backup-dir to keep (the oldest are removed)")
	fl.StringVar(&p.Root, "root", env("root", "local"), "root store: local (a root key file in the data dir) or vault (a Vault Transit key)")
	fl.StringVar(&p.SubjectKeys, "subject-keys", env("subject-keys", "tree"), "where subject keys live: tree (wrapped under bucket keys, erased by re-key and epoch) or transit (one Vault Transit key per subject, deleted at forget; needs --root vault); fixed when the data dir is created")
	// Vault settings take Vault's own environment variables as defaults. The
	// token is read from VAULT_TOKEN or a file, never from a flag value
	// (command lines are visible to other users).
	fl.StringVar(&p.Vault.Address, "vault-addr", getenv("VAULT_ADDR"), "Vault address (VAULT_ADDR)")
	fl.StringVar(&p.Vault.Namespace, "vault-namespace", getenv("VAULT_NAMESPACE"), "Vault namespace (VAULT_NAMESPACE)")
	fl.StringVar(&p.Vault.CACert, "vault-cacert", getenv("VAULT_CACERT"), "PEM file of the CA of Vault's TLS certificate (VAULT_CACERT)")
	fl.StringVar(&p.Vault.Mount, "vault-transit-mount", env("vault-transit-mount", "transit"), "Transit mount path")
	fl.StringVar(&p.Vault.Key, "vault-key", env("vault-key", "shredd-root"), "Transit key name of the root (names nothing about subjects)")
	tokenFile := fl.String("vault-token-file", env("vault-token-file", ""), "file holding the Vault token (default: VAULT_TOKEN)")
	fl.StringVar(&p.Vault.RoleID, "vault-approle-role-id", env("vault-approle-role-id", ""), "AppRole role id: log in with AppRole instead of a token")
	secretIDFile := fl.String("vault-approle-secret-id-file", env("vault-approle-secret-id-file", ""), "file holding the AppRole secret id")
	fl.StringVar(&p.Vault.AppRoleMount, "vault-approle-mount", env("vault-approle-mount", "approle"), "AppRole auth mount path")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if len(envErrs) > 0 {
		fmt.Fprintf(stderr, "shredd serve: %s\n", strings.Join(envErrs, "; "))
		return nil, errors.New("bad environment variable")
	}
	if (p.TLSCert == "") != (p.TLSKey == "") {
		fmt.Fprintln(stderr, "shredd serve: --tls-cert and --tls-key go together")
		return nil, errors.New("incomplete tls config")
	}
	switch p.Root {
	case "local":
	case "vault":
		p.Vault.Token = getenv("VAULT_TOKEN")
		for _, f := range []struct {
			path string
			dst  *string
		}{{*tokenFile, &p.Vault.Token}, {*secretIDFile, &p.Vault.SecretID}} {
			if f.path == "" {
				continue
			}
			b, err := os.ReadFile(f.path)
			if err != nil {
				fmt.Fprintf(stderr, "shredd serve: %v\n", err)
				return nil, err
			}
			*f.dst = strings.TrimSpace(string(b))
		}
		if p.Vault.Address == "" || (p.Vault.Token == "" && p.Vault.RoleID == "") {
			fmt.Fprintln(stderr, "shredd serve: --root vault needs --vault-addr (VAULT_ADDR) and a token (VAULT_TOKEN, --vault-token-file) or --vault-approle-role-id")
			return nil, errors.New("incomplete vault config")
		}
	default:
		fmt.Fprintf(stderr, "shredd serve: --root must be local or vault, not %q\n", p.Root)
		return nil, errors.New("bad root")
	}
	if p.SubjectKeys != "tree" && (p.SubjectKeys != "transit" || p.Root != "vault") {
		fmt.Fprintln(stderr, "shredd serve: --subject-keys must be tree, or transit together with --root vault")
		return nil, errors.New("bad subject-keys")
	}
	if p.DebugAddr != "" && !isLoopback(p.DebugAddr) {
		fmt.Fprintln(stderr, "shredd serve: --debug-addr must be a loopback address")
		return nil, errors.New("bad debug addr")
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "shredd serve: unexpected argument %q\n", fl.Arg(0))
		return nil, errors.New("unexpected argument")
	}
	p.EpochInterval, p.CacheTTL, p.ForgetDeadline, p.LeaseTTL = *epoch, *ttl, *deadline, *leaseTTL
	if p.EpochInterval < time.Second || p.CacheTTL < 0 || p.ForgetDeadline <= 0 || p.LeaseTTL <= 0 || p.Buckets < 1 || p.BackupKeep < 1 || p.MaxBody < 1024 || p.MaxRawBody < 1024 {
		fmt.Fprintln(stderr, "shredd serve: --epoch-interval must be >= 1s, --cache-ttl >= 0, --forget-deadline > 0, --buckets >= 1, --backup-keep >= 1, --max-body and --max-raw-body >= 1024")
		return nil, errors.New("bad flag value")
	}
	return p, nil
}

// bootstrapAdminToken gives a new installation its first token: an admin
// token written to path (mode 0600), announced once in the log by its path.
// The file is written and fsynced before the token is stored: a crash in
// between leaves a file whose hash the next start imports, never a token
// nobody holds. A data directory from before the token store keeps its
// admin token file the same way.
func bootstrapAdminToken(ctx context.Context, tokens *api.Tokens, path string, log *slog.Logger) error {
	n, err := tokens.Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	b, created, err := readOrCreate(path, func() []byte {
		return []byte(api.TokenPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32)) + "\n")
	})
	if err != nil {
		return err
	}
	crashpoint.Hit("admintoken:written")
	if err := tokens.Import(ctx, "admin", []string{api.ScopeAdmin}, sha256.Sum256([]byte(strings.TrimSpace(string(b))))); err != nil {
		return err
	}
	if created {
		log.Info("created the admin token; send it as 'Authorization: Bearer <token>'", "path", path)
	}
	return nil
}

// readOrCreate returns the secret in path, creating it (mode 0600) with
// make when the file does not exist; created says which. The file is never
// followed through a symlink and must be readable by its owner only; a new
// file is fsynced with its directory before use, and a failed write stops
// the start.
func readOrCreate(path string, make func() []byte) (b []byte, created bool, err error) {
	b, err = datadir.Read(path, datadir.Secret, 64<<10)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, false, err
	}
	b = make()
	if err := datadir.Create(path, b, datadir.Secret); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Run serves until ctx ends, then shuts down gracefully: in-flight requests
// finish, the background work stops, the database closes.
func (p *Program) Run(ctx context.Context, stderr io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if p.TLSCert == "" && !p.AllowRemote && !isLoopback(p.Addr) {
		return fmt.Errorf("refusing plain HTTP on non-loopback address %s (use --tls-cert/--tls-key, or --allow-remote-http behind a TLS proxy)", p.Addr)
	}
	var tlsConfig *tls.Config
	if p.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(p.TLSCert, p.TLSKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if err := datadir.Prepare(p.DataDir); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(p.DataDir, lockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("data dir %s is in use by another shredd process", p.DataDir)
	}

	secret, _, err := readOrCreate(filepath.Join(p.DataDir, secretFile), func() []byte { return randomBytes(32) })
	if err != nil {
		return fmt.Errorf("subject secret: %w", err)
	}
	hasher, err := derivation.NewHasher(secret)
	if err != nil {
		return err
	}
	var root keystore.RootStore
	var kms keystore.SubjectKMS
	rootDown := false // the root store did not answer at start-up
	switch p.Root {
	case "vault":
		vs, err := vault.New(p.Vault)
		if err != nil {
			return err
		}
		// Vault down at start-up: serve anyway, failing closed (503) until it
		// is back, so forgets still commit. A key that defeats shredding
		// stops the start.
		switch err := vs.Check(ctx); {
		case errors.Is(err, vault.ErrUnsafeKey):
			return err
		case err != nil:
			rootDown = true
			log.Warn("vault root store unavailable at start-up; failing closed until it answers", "error", err.Error())
		default:
			kc := vs.KeyConfig()
			log.Info("vault root store", "mount", p.Vault.Mount, "key", kc.Name, "latest_version", kc.LatestVersion,
				"min_available_version", kc.MinAvailableVersion, "exportable", kc.Exportable, "allow_plaintext_backup", kc.AllowPlaintextBackup)
		}
		go vs.KeepTokenFresh(ctx, p.Vault, func(err error) { log.Warn("vault token", "error", err.Error()) })
		root = vs
		if p.SubjectKeys == "transit" {
			kms = vs.SubjectKeys()
		}
	default:
		// A missing root file beside an existing database is never replaced
		// by a new root: it would open none of the database's keys.
		if _, err := os.Lstat(filepath.Join(p.DataDir, rootFile)); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(filepath.Join(p.DataDir, dbFile)); err == nil {
				return fmt.Errorf("local root: %s is missing but the database %s exists: a new root would open none of its keys, so none is created; put back the root file that goes with this database",
					filepath.Join(p.DataDir, rootFile), filepath.Join(p.DataDir, dbFile))
			}
		}
		ls, err := local.Open(filepath.Join(p.DataDir, rootFile))
		if err != nil {
			return err
		}
		root = ls
	}
	db, err := sqlite.Open(filepath.Join(p.DataDir, dbFile))
	if err != nil {
		return err
	}
	defer db.Close()
	journal, attKey, err := openJournal(ctx, p.DataDir, db, log)
	if err != nil {
		return err
	}
	ledger, err := derivation.OpenLedger(p.ledgerPath(), derivation.LedgerKey(secret))
	if err != nil {
		return err
	}
	defer ledger.Close()
	keys, err := keystore.Open(ctx, db, root, keystore.Options{Buckets: p.Buckets, CacheTTL: p.CacheTTL, SubjectKMS: kms, Journal: journal})
	if err != nil {
		return err
	}
	// A database the root store cannot open (a backup older than the last
	// epoch, or a root file older than the database) stops the start with
	// what to do, instead of answering 410 for everyone.
	// Not asked again when it just failed to answer (each try is a Vault
	// login, and Vault locks an AppRole out after a few failed ones).
	if rootDown {
		log.Warn("root store unavailable at start-up: the database's root versions were not checked")
	} else {
		switch err := keys.CheckRoot(ctx); {
		case errors.Is(err, keystore.ErrUnavailable):
			log.Warn("root store unavailable at start-up: the database's root versions were not checked", "error", err.Error())
		case err != nil:
			return err
		}
	}
	backups := make(chan struct{}, 1)
	svc, err := derivation.New(ctx, db, keys, hasher, derivation.Options{Deadline: p.ForgetDeadline, LeaseTTL: p.LeaseTTL, Journal: journal, Ledger: ledger,
		AfterEpoch: func() {
			select {
			case backups <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		return err
	}
	// Forgets the database lacks but the ledger holds (the database was
	// restored from a backup) are committed again before serving.
	rep, err := svc.ReconcileLedger(ctx)
	if err != nil {
		return fmt.Errorf("forget ledger: %w", err)
	}
	if rep.Reapplied > 0 {
		log.Warn("the database lacked forgets of the forget ledger (restored from a backup?): committed them again", "reapplied", rep.Reapplied)
	}
	if rep.Recorded > 0 {
		log.Info("recorded committed forgets in the forget ledger", "recorded", rep.Recorded)
	}
	tokens, err := api.OpenTokens(ctx, db, nil)
	if err != nil {
		return err
	}
	if err := bootstrapAdminToken(ctx, tokens, filepath.Join(p.DataDir, tokenFile), log); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	metrics := api.NewMetrics(svc, keys)
	metrics.Log = log
	// Forgets a crash left requested are committed before serving; their
	// re-keys, and those of forgets committed before the stop, are the
	// background work's, which starts at once (svc.Run reconciles on its
	// first tick).
	if err := svc.Recover(ctx); err != nil {
		log.Warn("recovery incomplete at start-up; the background work retries", "error", err.Error())
	}

	srv := &http.Server{
		Handler:           api.New(api.Config{Service: svc, Root: root, Log: log, Tokens: tokens, Metrics: metrics, AttestationKey: attKey, MaxBody: p.MaxBody, MaxRawBody: p.MaxRawBody}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return err
	}
	if p.DebugAddr != "" {
		dln, err := net.Listen("tcp", p.DebugAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("debug listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		dsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = dsrv.Serve(dln) }()
		defer dsrv.Close()
		log.Info("pprof listening", "addr", dln.Addr().String())
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	workDone := make(chan struct{})
	backupDone := make(chan struct{})
	go func() {
		defer close(backupDone)
		p.afterEpochs(workCtx, backups, db, keys, svc, root.Kind(), log)
	}()
	defer func() { stopWork(); <-backupDone }()
	svc.Kick() // reconcile at once, not at the first tick
	go func() {
		defer close(workDone)
		svc.Run(workCtx, p.EpochInterval, log)
	}()
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsConfig)
	}
	log.Info("listening", "addr", ln.Addr().String(), "scheme", scheme, "data_dir", p.DataDir, "root_store", root.Kind())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		stopWork()
		<-workDone
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(shCtx)
	stopWork()
	<-workDone
	svc.Close()
	return err
}
