package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/translog"
)

// Problem is an RFC 9457 problem details body. Code is stable and meant for
// machines; Detail is for people and never holds plaintext, keys or subject
// ids.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Leases is undeclared_derivation's extension member: the leases the
	// write left undeclared (at most 100).
	Leases []string `json:"leases,omitempty"`
}

// errorMap is the one table from errors to HTTP statuses and stable codes.
var errorMap = []struct {
	err    error
	status int
	code   string
	title  string
	detail string // said when the error's own text may not be (safeDetail)
}{
	{shredd.ErrShredded, http.StatusGone, "shredded", "A subject of this data was forgotten: the data is cryptographically erased", ""},
	{shredd.ErrUnknownKind, http.StatusBadRequest, "unknown_kind", "The artifact kind is not registered", ""},
	{shredd.ErrUnknownParent, http.StatusBadRequest, "unknown_parent", "A parent artifact is not registered", ""},
	// 409, not 422: the envelope is valid and authentic (it opened); it is
	// the registry's state that conflicts with it, and the same request
	// succeeds once an operator registered the artifact again. Not 404 or
	// 410: nothing was erased, and the client must not drop the data.
	{shredd.ErrUnknownArtifact, http.StatusConflict, "unknown_artifact", "The registry does not know this artifact",
		"the database is probably older than the ciphertext (restored from a backup taken before it was sealed); " +
			"an operator can register the artifact again from its envelope: shredd reregister (POST /v1/artifacts/reregister)"},
	{shredd.ErrNotFound, http.StatusNotFound, "not_found", "Not found", ""},
	{shredd.ErrForbidden, http.StatusForbidden, "wrong_holder", "The token acts for another holder", ""},
	{shredd.ErrConflict, http.StatusConflict, "conflict", "The request contradicts what is registered", ""},
	{shredd.ErrNotErased, http.StatusConflict, "not_erased", "The forget is not erased: its conditions are not all proven", ""},
	{shredd.ErrNotForgotten, http.StatusConflict, "not_forgotten", "The subject has no committed forget to follow: it is live (never forgotten, or reinstated already) or was never seen", ""},
	{shredd.ErrUnsupported, http.StatusConflict, "unsupported", "This service's configuration does not offer the operation", ""},
	{shredd.ErrSignature, http.StatusBadRequest, "invalid_signature", "The signature does not verify under the holder's key", ""},
	{shredd.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large", "A limit was exceeded", ""},
	{shredd.ErrEnvelope, http.StatusUnprocessableEntity, "invalid_envelope", "The ciphertext is not a valid shredd envelope or does not open with this context", ""},
	{shredd.ErrUnavailable, http.StatusServiceUnavailable, "backend_unavailable", "The key backend is unavailable; nothing was encrypted or decrypted", ""},
	{shredd.ErrDiskFull, http.StatusServiceUnavailable, "disk_full", "A disk shredd writes to is full or read-only; nothing was committed: retry later", ""},
	{errDatabaseFull, http.StatusServiceUnavailable, "disk_full", "A disk shredd writes to is full or read-only; nothing was committed: retry later", ""},
	{shredd.ErrNoLog, http.StatusConflict, "not_logged", "The forget's events are not in the transparency log", ""},
	{translog.ErrNotFound, http.StatusNotFound, "not_found", "Not found", ""},
	{translog.ErrFormat, http.StatusBadRequest, "invalid_log_request", "The tile path or tree size is invalid", ""},
	{shredd.ErrInvalid, http.StatusBadRequest, "invalid_request", "The request is invalid", ""},
}

// errDatabaseFull stands in errorMap for the database's errors that
// Failures.DiskFull recognises (storage.ErrDiskFull and the engines' own).
var errDatabaseFull = errors.New("api: the database's disk is full or read-only")

// retryAfter is the Retry-After of every 503 answer, in seconds.
const retryAfter = "5"

// problemError is an error the handlers raise with its own status and code.
type problemError struct {
	status int
	code   string
	title  string
	detail string
	// anySchema marks a problem of the body whatever request it is read
	// as (invalid UTF-8, a key twice, too deep): decodeCall reports it from
	// its first pass, whose field names are the most precise.
	anySchema bool
}

func (e *problemError) Error() string { return e.code + ": " + e.detail }

func badRequest(code, detail string) error {
	return &problemError{status: http.StatusBadRequest, code: code, title: "The request is invalid", detail: detail}
}

// safeDetail says which errors may show their text to the client: those of
// the registry's validation, whose messages name limits and fields, never
// data.
func safeDetail(err error) bool {
	for _, e := range []error{shredd.ErrInvalid, shredd.ErrTooLarge, shredd.ErrUnknownKind, shredd.ErrUnknownParent} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (c *codec) fail(w http.ResponseWriter, r *http.Request, err error) {
	d := c.describe(err)
	p := Problem{Status: d.Status, Code: d.Code, Title: d.Title, Detail: d.Detail, RequestID: requestID(r.Context()), Leases: d.Leases}
	level := slog.LevelInfo
	if p.Status >= 500 {
		level = slog.LevelError
	}
	// The full error goes to the log with the request id; error texts of
	// shredd's packages never carry plaintext, keys or raw subject ids.
	c.log.LogAttrs(r.Context(), level, "request failed", slog.String("request_id", p.RequestID),
		slog.String("code", p.Code), slog.Int("status", p.Status), slog.String("error", err.Error()))
	p.Type = "urn:shredd:problem:" + p.Code
	w.Header().Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusServiceUnavailable {
		// Every 503 is worth a retry (a backend back, space freed): say
		// when.
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
