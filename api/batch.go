package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/shredd/shredd"
)

// MaxBatch bounds the items of one batch_input.
const MaxBatch = 1000

// itemError is the error of one batch item: the status, code, title and
// detail of the problem the same item answers when sent alone.
type itemError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	// Leases is the undeclared_derivation problem's extension member: the
	// reads the write left undeclared.
	Leases []string `json:"leases,omitempty"`
}

// itemFailure is the batch result of an item that failed.
type itemFailure struct {
	Error itemError `json:"error"`
}

// batchResponse is the answer to a batch_input: one result per item, in
// order.
type batchResponse struct {
	BatchResults []any `json:"batch_results"`
}

// decodeCall decodes the body of a route that takes one request or a
// batch_input of them. A body without a batch_input field is decoded into
// single, and decodeCall returns nil items. A body with one must hold
// nothing else, and 1 to MaxBatch items that are JSON objects; the syntax
// and schema of every item are checked here, before any item runs.
//
// The hot request types take the hand-written decoder (decodeCallHot);
// whatever it does not accept, and every other type, takes
// decodeCallReflect, which accepts and refuses the same bodies.
func decodeCall[Req any](body []byte, single *Req) ([]*Req, error) {
	if items, ok := decodeCallHot(body, single); ok {
		return items, nil
	}
	var zero Req
	*single = zero // the hot path may have filled part of it (and wiped it)
	return decodeCallReflect(body, single)
}

// decodeCallReflect is decodeCall through encoding/json and checkStrict:
// the reference the hot path is checked against.
func decodeCallReflect[Req any](body []byte, single *Req) ([]*Req, error) {
	// Most bodies are single requests: decode them in one pass. A body that
	// spells batch_input otherwise (escaped, in other case) is decoded as a
	// single request too, and refused for its unknown field.
	if !bytes.Contains(body, []byte(`"batch_input"`)) {
		return nil, decodeJSON(body, single)
	}
	// A well-formed batch decodes in one pass: any other top-level field is
	// unknown to this struct. Anything else takes the passes below, which
	// name the problem.
	var fast struct {
		BatchInput []*Req `json:"batch_input"`
	}
	err := decodeJSON(body, &fast)
	if err == nil && len(fast.BatchInput) > 0 && len(fast.BatchInput) <= MaxBatch && !slices.Contains(fast.BatchInput, nil) {
		return fast.BatchInput, nil
	}
	if pe := (*problemError)(nil); errors.As(err, &pe) && pe.anySchema {
		// Invalid UTF-8 or a key twice: the passes below would find it too,
		// but the map pass could not name the field.
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := decodeJSON(body, &fields); err != nil {
		return nil, err
	}
	if _, ok := fields["batch_input"]; !ok {
		return nil, decodeJSON(body, single)
	}
	if len(fields) > 1 {
		return nil, badRequest("invalid_request", "batch_input cannot be combined with the fields of a single request")
	}
	var b struct {
		BatchInput []*Req `json:"batch_input"`
	}
	if err := decodeJSON(body, &b); err != nil {
		return nil, err
	}
	switch n := len(b.BatchInput); {
	case n == 0:
		return nil, badRequest("invalid_request", "batch_input must be an array of at least one item")
	case n > MaxBatch:
		return nil, fmt.Errorf("api: batch_input of %d items, at most %d: %w", n, MaxBatch, shredd.ErrTooLarge)
	}
	for _, it := range b.BatchInput {
		if it == nil {
			return nil, badRequest("invalid_json", "each item of batch_input must be a JSON object")
		}
	}
	return b.BatchInput, nil
}

// serveCall answers a route that takes a single request or a batch_input
// of them, running each through run.
func serveCall[Req, Resp any](c *codec, w http.ResponseWriter, r *http.Request, run func(context.Context, *Req) (Resp, error)) {
	serveCallMany(c, w, r, run, nil)
}

// serveCallMany is serveCall with a batch runner: many runs every item of
// a batch_input at once (the service's batch path, whose registrations
// share commits) and returns one result or error per item. With many nil,
// the items run through run, concurrently.
func serveCallMany[Req, Resp any](c *codec, w http.ResponseWriter, r *http.Request, run func(context.Context, *Req) (Resp, error),
	many func(context.Context, []*Req) ([]Resp, []error)) {
	buf, err := c.readBody(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var req Req
	items, err := decodeCall(buf.Bytes(), &req)
	putBody(buf)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if items != nil && many != nil {
		out, errs := many(withBodyRead(r.Context()), items)
		results := make([]any, len(items))
		for i := range items {
			if errs[i] != nil {
				results[i] = c.itemFailure(r, i, errs[i])
			} else {
				results[i] = out[i]
			}
		}
		writeJSON(w, http.StatusOK, batchResponse{BatchResults: results})
		return
	}
	if items != nil {
		serveBatch(c, w, r, items, run)
		return
	}
	out, err := run(r.Context(), &req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// runValid is the batch runner of a route whose service takes a whole
// batch: it validates each request with check, runs the valid ones through
// run at once, and answers each request in order: its validation error, or
// run's result or error for it.
func runValid[Req, In, Out, Resp any](reqs []*Req, check func(*Req) (In, error), run func([]In) ([]Out, []error),
	answer func(Out) Resp) ([]Resp, []error) {
	out := make([]Resp, len(reqs))
	errs := make([]error, len(reqs))
	in := make([]In, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, req := range reqs {
		v, err := check(req)
		if err != nil {
			errs[i] = err
			continue
		}
		in = append(in, v)
		idx = append(idx, i)
	}
	res, rerrs := run(in)
	for j, i := range idx {
		if errs[i] = rerrs[j]; errs[i] == nil {
			out[i] = answer(res[j])
		}
	}
	return out, errs
}

// batchWorkers bounds the items of one batch that run at once.
const batchWorkers = 64

// serveBatch runs the items of a batch and answers 200 with one result per
// item, in order: its single response, or an itemFailure. A failed item
// does not stop the others, and the batch answers 200 even when every item
// failed: items are independent and are not rolled back, so a client must
// read each result to learn which took effect. (Vault Transit answers 400
// when any item fails, which files a partial success under client errors.)
// Items run concurrently (up to batchWorkers at once), so that their
// registrations and leases share group commits instead of waiting for one
// disk flush each.
func serveBatch[Req, Resp any](c *codec, w http.ResponseWriter, r *http.Request, items []*Req,
	run func(context.Context, *Req) (Resp, error)) {
	results := make([]any, len(items))
	errs := make([]error, len(items))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(batchWorkers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out, err := run(r.Context(), items[i])
				if err != nil {
					errs[i] = err
					continue
				}
				results[i] = out
			}
		}()
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			results[i] = c.itemFailure(r, i, err)
		}
	}
	writeJSON(w, http.StatusOK, batchResponse{BatchResults: results})
}

// itemFailure logs the failure of item i of a batch, as fail does for a
// request, and returns its result.
func (c *codec) itemFailure(r *http.Request, i int, err error) itemFailure {
	e := c.describe(err)
	level := slog.LevelInfo
	if e.Status >= 500 {
		level = slog.LevelError
	}
	c.log.LogAttrs(r.Context(), level, "batch item failed", slog.String("request_id", requestID(r.Context())),
		slog.Int("item", i), slog.String("code", e.Code), slog.Int("status", e.Status), slog.String("error", err.Error()))
	return itemFailure{Error: e}
}

// describe maps an error to what a client may learn of it, as fail does: a
// problemError's own status and code, else the first match in errorMap
// (with the error text as detail only when safeDetail allows it), else 503
// backend_unavailable when the database did not answer, else 500 internal
// without detail.
func (c *codec) describe(err error) itemError {
	var pe *problemError
	if errors.As(err, &pe) {
		return itemError{Status: pe.status, Code: pe.code, Title: pe.title, Detail: pe.detail}
	}
	var ud *shredd.UndeclaredDerivationError
	if errors.As(err, &ud) {
		return itemError{Status: http.StatusConflict, Code: "undeclared_derivation",
			Title:  "The writer holds reads it neither named nor declared independent of",
			Detail: fmt.Sprintf("%s reads (decrypt leases) of this writer are attributable and not declared: name the ones the data came from in leases (it inherits their lineage); independent work belongs in its own unit of work", ud.Counted()),
			Leases: idStrings(ud.Leases)}
	}
	for _, m := range errorMap {
		if errors.Is(err, m.err) || (m.err == errDatabaseFull && c.diskFull(err)) {
			e := itemError{Status: m.status, Code: m.code, Title: m.title, Detail: m.detail}
			if safeDetail(err) {
				e.Detail = err.Error()
			}
			return e
		}
	}
	// The database did not answer (down, unreachable, its write lock not
	// granted in time): fail closed, as for the key backend.
	if c.failures != nil && c.failures.Unavailable(err) {
		return itemError{Status: http.StatusServiceUnavailable, Code: "backend_unavailable", Title: "The database is unavailable; the request was not carried out"}
	}
	return itemError{Status: http.StatusInternalServerError, Code: "internal", Title: "Internal error"}
}

// diskFull says whether err is the database's full or read-only disk
// (Failures.DiskFull), also in an error that did not pass through
// storage's wrapping (a prepared statement's).
func (c *codec) diskFull(err error) bool {
	return c.failures != nil && c.failures.DiskFull(err)
}
