package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// readyTimeout bounds each probe of GET /readyz, so that a database whose
// write gate stays taken or a root store that does not answer makes the
// route answer 503 in time for the orchestrator's own probe timeout.
const readyTimeout = 2 * time.Second

// healthHandlers serve the probes of orchestrators and load balancers:
// /healthz, /livez and /readyz, which need no token.
type healthHandlers struct {
	*codec
	root   RootProbe
	tokens Tokens // the one handle to the database (probeDB)
	disks  []diskCheck
	writes WriteProbe // nil: not asked
}

// RootProbe is what GET /healthz and GET /readyz ask of the root store.
type RootProbe interface {
	// Kind names the backend, such as "local" or "vault-transit".
	Kind() string
	// LatestVersion asks the backend for the root version new wraps use;
	// an error means the backend does not answer.
	LatestVersion(ctx context.Context) (int, error)
}

// healthz answers GET /healthz: the root store's kind and latest version,
// or 503 when it does not answer.
func (hc *healthHandlers) healthz(w http.ResponseWriter, r *http.Request) {
	v, err := hc.root.LatestVersion(r.Context())
	if err != nil {
		hc.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "backend_unavailable", title: "The root store is unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "root_store": hc.root.Kind(), "root_version": v})
}

// livez answers GET /livez: the process is up and serving HTTP. It checks
// nothing else, on purpose: a liveness probe that failed when a dependency
// is down would get the process restarted, which cures neither.
func (hc *healthHandlers) livez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers GET /readyz: 200 only when the database accepts a write,
// the root store answers, the durable writers report no failure
// (Config.Writes) and every disk of Config.Disks takes a file
// (diskProbe), else 503 not_ready naming the parts that failed (their
// errors go to the log, never to the client). Every part is probed every
// time, so that the answer names all that failed; a disk's probe result is
// reused for diskProbeTTL, so that /readyz cannot be used to hammer the
// disks.
func (hc *healthHandlers) readyz(w http.ResponseWriter, r *http.Request) {
	var failed []string
	if err := hc.probeDB(r.Context()); err != nil {
		what := "database: does not accept a write"
		if hc.failures != nil && hc.failures.DiskFull(err) {
			what += " (its disk is full or read-only)"
		}
		failed = append(failed, what)
		hc.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
			slog.String("part", "database"), slog.String("error", err.Error()))
	}
	disks := map[string]string{}
	for _, d := range hc.disks {
		if err := d.probe.run(); err != nil {
			disks[d.name] = "failed"
			failed = append(failed, "disk "+d.name+": cannot write a file (full or read-only)")
			hc.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
				slog.String("part", "disk "+d.name), slog.String("error", err.Error()))
			continue
		}
		disks[d.name] = "ok"
	}
	if hc.writes != nil {
		if err := hc.writes.WriteErr(); err != nil {
			failed = append(failed, "writes: registrations, forgets or the root file cannot be made durable")
			hc.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
				slog.String("part", "writes"), slog.String("error", err.Error()))
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	v, err := hc.root.LatestVersion(ctx)
	cancel()
	if err != nil {
		failed = append(failed, "root store: does not answer")
		hc.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
			slog.String("part", "root_store"), slog.String("error", err.Error()))
	}
	if failed != nil {
		hc.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "not_ready", title: "The service is not ready",
			detail: strings.Join(failed, "; ")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "database": "ok", "root_store": hc.root.Kind(), "root_version": v,
		"disks": disks})
}

// Disk is a directory shredd must be able to write to, probed by GET
// /readyz under its Name: "data" (the data directory), "ledger" (the
// forget ledger's directory), "backups" (--backup-dir).
type Disk struct {
	Name string
	Dir  string
}

// diskCheck is one disk of Config.Disks: its name and its directory's
// probe.
type diskCheck struct {
	name  string
	probe *diskProbe
}

// diskProbeTTL is how long a disk's probe result is reused.
const diskProbeTTL = time.Second

// diskProbe probes one disk: it creates a file in the directory, writes a
// block to it, fsyncs and removes it. A full disk (ENOSPC, EDQUOT) or a
// read-only one (EROFS) fails it; a database write alone would not show a
// full disk while SQLite reuses the pages of its WAL, and the forget
// ledger or the backups may be on another volume.
type diskProbe struct {
	dir string
	now func() time.Time

	mu  sync.Mutex // one probe at a time; the others wait for its result
	at  time.Time  // when err was found; zero: never probed
	err error
}

// probeBlock is what a probe writes: one block, so that a disk without a
// free block fails it.
var probeBlock = make([]byte, 4096)

func (d *diskProbe) run() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now := d.now(); !d.at.IsZero() && now.Sub(d.at) < diskProbeTTL && now.Sub(d.at) >= 0 {
		return d.err
	}
	d.err = probeDir(d.dir)
	d.at = d.now()
	return d.err
}

// probeDir creates, writes, fsyncs and removes a small file in dir.
func probeDir(dir string) error {
	f, err := os.CreateTemp(dir, ".shredd-ready-*")
	if err != nil {
		return fmt.Errorf("api: probe disk: %w", err)
	}
	name := f.Name()
	_, werr := f.Write(probeBlock)
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	rerr := os.Remove(name)
	for _, err := range []error{werr, cerr, rerr} {
		if err != nil {
			return fmt.Errorf("api: probe disk: %w", err)
		}
	}
	return nil
}

// errNoDatabase is the probe's error for a Server without a token store.
var errNoDatabase = errors.New("api: no database to probe (the Server has no token store)")

// probeDB writes to the service's database. The Server reaches it through
// the token store, the one handle to it that the api package holds.
func (hc *healthHandlers) probeDB(ctx context.Context) error {
	if hc.tokens == nil {
		return errNoDatabase
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return hc.tokens.ProbeWrite(ctx, time.Now())
}
