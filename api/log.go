package api

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/translog"
)

// Evidence is what the transparency log's routes and the regulator export
// ask of the service (erasure.Evidence), in the types of their formats
// (bundle, translog), which the root package does not import.
type Evidence interface {
	// Export assembles the regulator export of an erased forget, with a
	// consistency proof from tree size since when since > 0; a forget not
	// erased gives shredd.ErrNotErased, since beyond the tree
	// shredd.ErrInvalid, a service without a log shredd.ErrNoLog.
	Export(ctx context.Context, id shredd.ID, since int64) (*bundle.Bundle, error)
	// TransparencyLog returns the transparency log and its note verifier
	// key, or nil when the service keeps none.
	TransparencyLog() (*translog.Log, string)
}

// logHandlers serve the transparency log's routes and the regulator
// export of a forget.
type logHandlers struct {
	*codec
	svc Evidence // nil: the routes answer 503 no_log
}

// The transparency log's routes (docs/transparency.md), under /v1/log, and
// the regulator export of a forget. Every answer is public material (signed
// events hold commitments, never subject ids), but the routes still need
// the audit scope: the log's size and timing say how many subjects and
// forgets there are.

// tlogOf returns the service's log, or fails the request with 503.
func (lh *logHandlers) tlogOf(w http.ResponseWriter, r *http.Request) *translog.Log {
	var l *translog.Log
	if lh.svc != nil {
		l, _ = lh.svc.TransparencyLog()
	}
	if l == nil {
		lh.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "no_log", title: "This service keeps no transparency log"})
	}
	return l
}

func writeText(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// logCheckpoint answers the log's current checkpoint (C2SP tlog-checkpoint,
// a signed note).
func (lh *logHandlers) logCheckpoint(w http.ResponseWriter, r *http.Request) {
	l := lh.tlogOf(w, r)
	if l == nil {
		return
	}
	cp, err := l.Checkpoint(r.Context())
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	crashpoint.Hit("log:checkpoint") // signed, not yet handed out
	w.Header().Set("Cache-Control", "no-store")
	writeText(w, "text/plain; charset=utf-8", cp)
}

// logKey answers the log's signed-note verifier key.
func (lh *logHandlers) logKey(w http.ResponseWriter, r *http.Request) {
	var vkey string
	if lh.svc != nil {
		_, vkey = lh.svc.TransparencyLog()
	}
	if vkey == "" {
		lh.tlogOf(w, r)
		return
	}
	writeText(w, "text/plain; charset=utf-8", []byte(vkey+"\n"))
}

// logTile answers a tile in the C2SP tlog-tiles layout: /v1/log/tile/<L>/<N>[.p/<W>]
// (hashes) and /v1/log/tile/entries/<N>[.p/<W>] (entry bundles).
func (lh *logHandlers) logTile(w http.ResponseWriter, r *http.Request) {
	l := lh.tlogOf(w, r)
	if l == nil {
		return
	}
	path := "tile/" + chi.URLParam(r, "*")
	b, err := l.ReadTile(r.Context(), path)
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	if !strings.Contains(path, ".p/") {
		// A full tile never changes (tlog-tiles).
		w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	}
	writeText(w, "application/octet-stream", b)
}

// logProof answers the c2sp.org/tlog-proof@v1 inclusion proof of entry
// {index}, against a checkpoint of tree size ?size= (default: the current
// tree).
func (lh *logHandlers) logProof(w http.ResponseWriter, r *http.Request) {
	l := lh.tlogOf(w, r)
	if l == nil {
		return
	}
	idx, err := strconv.ParseInt(chi.URLParam(r, "index"), 10, 64)
	if err != nil || idx < 0 {
		lh.fail(w, r, badRequest("invalid_index", "index must be a non-negative decimal integer"))
		return
	}
	size, err := sizeParam(r, "size")
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	p, err := l.Prove(r.Context(), idx, size)
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	writeText(w, "text/plain; charset=utf-8", p)
}

// logConsistency answers the consistency proof between tree sizes ?old= and
// ?new= (default: the current tree), in shredd/tlog-consistency@v1 text.
func (lh *logHandlers) logConsistency(w http.ResponseWriter, r *http.Request) {
	l := lh.tlogOf(w, r)
	if l == nil {
		return
	}
	old, err := sizeParam(r, "old")
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	newSize, err := sizeParam(r, "new")
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	if newSize == 0 {
		if newSize, err = l.Size(r.Context()); err != nil {
			lh.fail(w, r, err)
			return
		}
	}
	if old > newSize {
		lh.fail(w, r, badRequest("invalid_size", "old must not be above new"))
		return
	}
	p, err := l.ProveConsistency(r.Context(), old, newSize)
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	writeText(w, "text/plain; charset=utf-8", (&translog.ConsistencyProof{Old: old, New: newSize, Hashes: p}).Marshal())
}

// sizeParam reads an optional non-negative tree size from the query (0 when
// absent).
func sizeParam(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid_size", name+" must be a non-negative decimal integer")
	}
	return n, nil
}

// export answers the regulator export of an erased forget: one gzip tar
// archive (package bundle, docs/transparency.md); ?since=N adds a
// consistency proof from tree size N.
func (lh *logHandlers) export(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	since, err := sizeParam(r, "since")
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	if lh.tlogOf(w, r) == nil {
		return
	}
	b, err := lh.svc.Export(r.Context(), id, since)
	if err != nil {
		lh.fail(w, r, err)
		return
	}
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		lh.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+b.Dir()+`.tar.gz"`)
	writeText(w, "application/gzip", buf.Bytes())
}
