package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// readyTimeout bounds each probe of GET /readyz, so that a database whose
// write gate stays taken or a root store that does not answer makes the
// route answer 503 in time for the orchestrator's own probe timeout.
const readyTimeout = 2 * time.Second

// livez answers GET /livez: the process is up and serving HTTP. It checks
// nothing else, on purpose: a liveness probe that failed when a dependency
// is down would get the process restarted, which cures neither.
func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers GET /readyz: 200 only when the database accepts a write
// and the root store answers, else 503 not_ready naming the parts that
// failed (their errors go to the log, never to the client). Both parts are
// probed every time, so that the answer names all that failed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var failed []string
	if err := s.probeDB(r.Context()); err != nil {
		failed = append(failed, "database: does not accept a write")
		s.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
			slog.String("part", "database"), slog.String("error", err.Error()))
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	v, err := s.root.Versions(ctx)
	cancel()
	if err != nil {
		failed = append(failed, "root store: does not answer")
		s.log.LogAttrs(r.Context(), slog.LevelError, "not ready", slog.String("request_id", requestID(r.Context())),
			slog.String("part", "root_store"), slog.String("error", err.Error()))
	}
	if failed != nil {
		s.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "not_ready", title: "The service is not ready",
			detail: strings.Join(failed, "; ")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "database": "ok", "root_store": s.root.Kind(), "root_version": v.Latest})
}

// errNoDatabase is the probe's error for a Server without a token store.
var errNoDatabase = errors.New("api: no database to probe (the Server has no token store)")

// probeDB writes to the service's database. The Server reaches it through
// the token store, the one handle to it that the api package holds.
func (s *Server) probeDB(ctx context.Context) error {
	if s.tokens == nil {
		return errNoDatabase
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return s.tokens.db.ProbeWrite(ctx, time.Now())
}
