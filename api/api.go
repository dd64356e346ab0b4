// Package api is shredd's HTTP interface (chi): routes, authentication,
// request limits and the mapping of errors to RFC 9457 problem details. Its
// vocabulary follows Vault's Transit engine (plaintext, ciphertext, context);
// docs/api.md is the reference.
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/ui"
)

// DefaultMaxBody bounds a request body: 1 MiB of plaintext in base64 plus
// room for the rest of the request.
const DefaultMaxBody = 1<<20*4/3 + 64<<10

// Config configures a Server.
type Config struct {
	Service shredd.Service
	// Evidence serves the transparency log and the regulator export; nil
	// answers their routes 503 no_log.
	Evidence Evidence
	Root     RootProbe // probed by /healthz and /readyz
	Log      *slog.Logger
	// Tokens verifies the bearer tokens of /v1 calls.
	Tokens Tokens
	// Failures tells the database's errors that answer 503 (a full disk,
	// no answer); without it they answer 500.
	Failures Failures
	// Metrics, when set, counts requests and serves GET /metrics.
	Metrics *Metrics
	// MaxBody bounds every request body in bytes (DefaultMaxBody when 0),
	// except those of the raw-body routes.
	MaxBody int64
	// MaxRawBody bounds the bodies of the raw-body routes (POST
	// /v1/encrypt/raw, /v1/decrypt/raw) in bytes (DefaultMaxRawBody when 0).
	MaxRawBody int64
	// Disks are the directories shredd writes to, each probed by GET
	// /readyz with a small file (a directory named twice is probed once).
	Disks []Disk
	// Writes, when set, is asked by GET /readyz whether the durable
	// writers (the registration WAL and its mark, the forget ledger, the
	// root file) take their writes; an error answers 503.
	Writes WriteProbe
	// Fence, when set, is asked before every /v1 call whether this process
	// still owns its data directory; an error answers 503 to every call
	// (another process claimed the root: nothing may be acknowledged here).
	Fence FenceProbe
}

// FenceProbe reports that this process no longer owns its data directory
// (keystore/local.ErrFenced): nil while it does.
type FenceProbe interface {
	FenceErr() error
}

// WriteProbe reports why shredd's durable writes fail now: nil while
// they succeed.
type WriteProbe interface {
	WriteErr() error
}

// Server serves the HTTP API. It holds the router's own concerns (the
// middlewares, authentication, body limits, the problem answers of its
// codec); the routes are served by one small handler type per concern,
// each holding only what it needs:
//
//   - sealHandlers: encrypt, decrypt, data keys, and their raw-body routes
//   - artifactHandlers: the Sealer's kinds, artifacts, leases, the reregister repair
//   - forgetHandlers: forgets, their verification and attestation, epochs
//   - holderHandlers: holders, their purge work, acks and inventories
//   - logHandlers: the transparency log and the regulator export
//   - healthHandlers: /healthz, /livez, /readyz
type Server struct {
	*codec
	tokens  Tokens
	metrics *Metrics
	fence   FenceProbe

	seal      *sealHandlers
	artifacts *artifactHandlers
	forgets   *forgetHandlers
	holders   *holderHandlers
	tlog      *logHandlers
	health    *healthHandlers
}

// codec reads request bodies within the server's limits and answers
// failures as problem details; every handler type shares the server's.
type codec struct {
	log      *slog.Logger
	maxBody  int64
	maxRaw   int64
	failures Failures // nil: none recognised
}

// Tokens is what the API asks of the token store (access.Tokens): the
// record of a /v1 call's bearer token, and a write to the database the
// tokens are kept in (the one handle to it the API holds), for GET /readyz.
type Tokens interface {
	// Authenticate returns the record of a bearer secret;
	// shredd.ErrTokenInvalid for one unknown, expired or revoked.
	Authenticate(ctx context.Context, raw string) (*shredd.Token, error)
	// ProbeWrite checks that the database accepts a write now.
	ProbeWrite(ctx context.Context, now time.Time) error
}

// Failures tells which errors of the database answer 503 rather than 500
// (storage.Failures): a disk it writes to that is full or read-only, and a
// database that does not answer.
type Failures interface {
	DiskFull(err error) bool
	Unavailable(err error) bool
}

// New returns a Server.
func New(c Config) *Server {
	cd := &codec{log: c.Log, maxBody: c.MaxBody, maxRaw: c.MaxRawBody, failures: c.Failures}
	if cd.maxBody <= 0 {
		cd.maxBody = DefaultMaxBody
	}
	if cd.maxRaw <= 0 {
		cd.maxRaw = DefaultMaxRawBody
	}
	if cd.log == nil {
		cd.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	s := &Server{codec: cd, tokens: c.Tokens, metrics: c.Metrics, fence: c.Fence,
		seal:      &sealHandlers{codec: cd, svc: c.Service},
		artifacts: &artifactHandlers{codec: cd, svc: c.Service},
		forgets:   &forgetHandlers{codec: cd, svc: c.Service, evidence: c.Service, lives: c.Service},
		holders:   &holderHandlers{codec: cd, svc: c.Service},
		tlog:      &logHandlers{codec: cd, svc: c.Evidence},
		health:    &healthHandlers{codec: cd, root: c.Root, tokens: c.Tokens, writes: c.Writes},
	}
	byDir := map[string]*diskProbe{}
	for _, d := range c.Disks {
		// The same directory under two names: one probe, reported under
		// each name.
		p := byDir[d.Dir]
		if p == nil {
			p = &diskProbe{dir: d.Dir, now: time.Now}
			byDir[d.Dir] = p
		}
		s.health.disks = append(s.health.disks, diskCheck{name: d.Name, probe: p})
	}
	return s
}

// fenced answers 503 to every call once Config.Fence reports that this
// process no longer owns its data directory.
func (s *Server) fenced(next http.Handler) http.Handler {
	if s.fence == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.fence.FenceErr(); err != nil {
			s.log.LogAttrs(r.Context(), slog.LevelError, "fenced: another process owns the data directory", slog.String("request_id", requestID(r.Context())),
				slog.String("error", err.Error()))
			s.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "backend_unavailable", title: "The backend is unavailable",
				detail: "this process no longer owns its data directory"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fieldNameRe matches the field names shredd's requests use; only such
// names are echoed in errors.
var fieldNameRe = regexp.MustCompile(`^[a-z_]{1,32}$`)

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.requestIDs, s.accessLog, s.metrics.Middleware, s.recoverer, s.limitBody)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if uiPath(r.URL.Path) {
			ui.SetHeaders(w.Header())
		}
		s.fail(w, r, &problemError{status: http.StatusNotFound, code: "no_route", title: "No such route"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		if uiPath(r.URL.Path) {
			ui.SetHeaders(w.Header())
			w.Header().Set("Allow", "GET")
		}
		s.fail(w, r, &problemError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", title: "Method not allowed"})
	})
	r.Get("/healthz", s.health.healthz)
	r.Get("/livez", s.health.livez)
	r.Get("/readyz", s.health.readyz)
	r.Get("/v1/openapi.json", s.openAPI) // no token: the document holds no secrets
	s.mountUI(r)
	if s.metrics != nil {
		r.With(s.authenticate, s.require(shredd.ScopeAudit)).Get("/metrics", s.metrics.Handler().ServeHTTP)
	}
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate, s.fenced)
		r.With(s.require(shredd.ScopeEncrypt, shredd.ScopeDecrypt, shredd.ScopeRegister, shredd.ScopeAudit)).Get("/kinds", s.artifacts.listKinds)
		r.With(s.require(shredd.ScopeAdmin)).Put("/kinds/{kind}", s.artifacts.putKind)
		r.With(s.require(shredd.ScopeEncrypt)).Post("/encrypt", s.seal.encrypt)
		r.With(s.require(shredd.ScopeDecrypt)).Post("/decrypt", s.seal.decrypt)
		r.With(s.require(shredd.ScopeEncrypt)).Post("/encrypt/raw", s.seal.encryptRaw)
		r.With(s.require(shredd.ScopeEncrypt)).Post("/datakey", s.seal.dataKey)
		r.With(s.require(shredd.ScopeDecrypt)).Post("/decrypt/raw", s.seal.decryptRaw)
		r.With(s.require(shredd.ScopeDecrypt)).Post("/leases/{id}/release", s.artifacts.releaseLease)
		r.With(s.require(shredd.ScopeRegister)).Post("/artifacts", s.artifacts.registerArtifact)
		r.With(s.require(shredd.ScopeAdmin)).Post("/artifacts/reregister", s.artifacts.reregister)
		r.With(s.require(shredd.ScopeRegister, shredd.ScopeAudit)).Get("/artifacts/{id}", s.artifacts.getArtifact)
		r.With(s.require(shredd.ScopeForget)).Post("/forget", s.forgets.forget)
		r.With(s.require(shredd.ScopeForget, shredd.ScopeAudit)).Get("/forgets", s.forgets.listForgets)
		r.With(s.require(shredd.ScopeForget, shredd.ScopeAudit)).Get("/forgets/{id}", s.forgets.getForget)
		r.With(s.require(shredd.ScopeForget, shredd.ScopeAudit)).Post("/forgets/{id}/verify", s.forgets.verifyForget)
		r.With(s.require(shredd.ScopeForget, shredd.ScopeAudit)).Get("/forgets/{id}/attestation", s.forgets.attestation)
		r.With(s.require(shredd.ScopeForget, shredd.ScopeAudit)).Get("/forgets/{id}/export", s.tlog.export)
		r.With(s.require(shredd.ScopeAudit)).Get("/log/checkpoint", s.tlog.logCheckpoint)
		r.With(s.require(shredd.ScopeAudit)).Get("/log/key", s.tlog.logKey)
		r.With(s.require(shredd.ScopeAudit)).Get("/log/tile/*", s.tlog.logTile)
		r.With(s.require(shredd.ScopeAudit)).Get("/log/proof/{index}", s.tlog.logProof)
		r.With(s.require(shredd.ScopeAudit)).Get("/log/consistency", s.tlog.logConsistency)
		r.With(s.require(shredd.ScopeRegister)).Post("/forgets/{id}/acks", s.holders.ack)
		r.With(s.require(shredd.ScopeAdmin)).Post("/holders", s.holders.registerHolder)
		r.With(s.require(shredd.ScopeRegister, shredd.ScopeAudit)).Get("/holders", s.holders.listHolders)
		r.With(s.require(shredd.ScopeRegister, shredd.ScopeAudit)).Get("/holders/{id}/purges", s.holders.purges)
		r.With(s.require(shredd.ScopeRegister)).Post("/holders/{id}/inventory", s.holders.inventory)
		r.With(s.require(shredd.ScopeRegister)).Put("/holders/{id}/probe", s.holders.declareProbes)
		r.With(s.require(shredd.ScopeRegister)).Delete("/holders/{id}/probe", s.holders.declareProbes)
		r.With(s.require(shredd.ScopeRegister, shredd.ScopeAudit)).Get("/holders/{id}/probes", s.holders.probes)
		r.With(s.require(shredd.ScopeRegister)).Post("/holders/{id}/probes/{probe}", s.holders.answerProbe)
		r.With(s.require(shredd.ScopeAdmin)).Post("/epoch", s.forgets.epoch)
		r.With(s.require(shredd.ScopeAdmin)).Post("/subjects/reinstate", s.forgets.reinstate)
	})
	return r
}

func (s *Server) requestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// accessLog logs one line per request: the route pattern (never the query,
// never a body), status, size and duration.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("request_id", requestID(r.Context())),
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", ww.Status()),
			slog.Int("bytes", ww.BytesWritten()), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "request_id", requestID(r.Context()))
				s.fail(w, r, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, what := s.maxBody, "request bodies"
		if rawRoutes[r.URL.Path] {
			limit, what = s.maxRaw, "raw request bodies"
		}
		if r.ContentLength > limit {
			s.fail(w, r, &problemError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", title: "Request body too large",
				detail: what + " are limited to " + strconv.FormatInt(limit, 10) + " bytes"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// decode reads one JSON object into v: content type application/json,
// nesting within MaxDepth, unknown fields refused, nothing after the object.
func (c *codec) decode(r *http.Request, v any) error {
	buf, err := c.readBody(r)
	if err != nil {
		return err
	}
	defer putBody(buf)
	return decodeBody(buf.Bytes(), v)
}

// decodeBody is decodeJSON with the hand-written decoder for the hot
// request types (hotjson.go): what it does not accept takes decodeJSON,
// which gives the same result.
func decodeBody(body []byte, v any) error {
	if v, ok := v.(*sourceBody); ok {
		if decodeHot(body, v) {
			return nil
		}
		*v = sourceBody{} // the hot path may have filled part of it
	}
	return decodeJSON(body, v)
}

// maxPooledBody bounds the buffers kept in bodyPool: the odd large body
// (up to MaxBody) is read into a buffer that is dropped afterwards, so
// that the pool does not pin its memory.
const maxPooledBody = 256 << 10

// bodyPool holds the buffers request bodies are read into, so that the
// typical request reads into memory of an earlier one instead of growing a
// new slice. A buffer holds the plaintext of the request (its base64): it
// is cleared before it returns to the pool, and the decoders copy every
// string out of it (no decoded value aliases it), so that nothing of a
// request outlives its decoding in pooled memory.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads a request body of content type application/json, within
// the body limit, into a buffer of bodyPool. The caller hands the buffer to
// putBody once it decoded the body, and keeps nothing that aliases it.
func (c *codec) readBody(r *http.Request) (*bytes.Buffer, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, &problemError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", title: "Content-Type must be application/json"}
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	if n := r.ContentLength; n > 0 && n <= c.maxBody {
		// ReadFrom wants bytes.MinRead free before each read, the last
		// one (which finds EOF) included. Growing once also leaves no
		// outgrown copy of the body behind, uncleared, for the collector.
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		putBody(buf)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &problemError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", title: "Request body too large",
				detail: "request bodies are limited to " + strconv.FormatInt(c.maxBody, 10) + " bytes"}
		}
		return nil, badRequest("bad_body", "the request body could not be read")
	}
	return buf, nil
}

// putBody clears a body buffer and returns it to bodyPool, unless it grew
// beyond maxPooledBody.
func putBody(buf *bytes.Buffer) {
	clear(buf.Bytes())
	buf.Reset()
	if buf.Cap() <= maxPooledBody {
		bodyPool.Put(buf)
	}
}

// decodeJSON decodes body, one JSON object, into v: strictly
// (checkStrict: valid UTF-8, no key twice, field names exact, nesting
// within MaxDepth), unknown fields refused, nothing after the object.
func decodeJSON(body []byte, v any) error {
	if err := checkStrict(body, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("invalid_json", "the body is not valid JSON (offset "+strconv.FormatInt(se.Offset, 10)+")")
		case errors.As(err, &te):
			return badRequest("invalid_json", "field "+strconv.Quote(te.Field)+" has the wrong type")
		}
		if errors.Is(err, io.EOF) {
			return badRequest("invalid_json", "the body is empty; a JSON object is required")
		}
		// Unknown fields and other schema mismatches. encoding/json's message
		// names the field as the client wrote it, and a client may write data
		// (a subject id) as a key: name only field names of shredd's own form.
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			if name, err := strconv.Unquote(f); err == nil && fieldNameRe.MatchString(name) {
				return badRequest("invalid_json", "unknown field "+strconv.Quote(name))
			}
			return badRequest("invalid_json", "the body holds an unknown field")
		}
		return badRequest("invalid_json", "the body does not match the request")
	}
	if dec.More() {
		return badRequest("invalid_json", "the body holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("invalid_json", "the body holds more than one JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// strictBase64 refuses non-zero padding bits ("YR==" for "YQ=="), so that
// each value has one spelling.
var strictBase64 = base64.StdEncoding.Strict()

// b64String is base64.StdEncoding.EncodeToString(b) in one allocation,
// the string's (EncodeToString allocates the encoded bytes, then copies
// them into the string): for the plaintexts and data keys of the answers,
// of which it leaves no copy but the string it returns.
func b64String(b []byte) string {
	var sb strings.Builder
	sb.Grow(base64.StdEncoding.EncodedLen(len(b)))
	// Whole groups of 3 bytes encode to whole groups of 4 characters
	// without padding, so the chunks' encodings joined are b's.
	var chunk [1024]byte
	const in = len(chunk) / 4 * 3
	for len(b) > 0 {
		n := min(len(b), in)
		m := base64.StdEncoding.EncodedLen(n)
		base64.StdEncoding.Encode(chunk[:m], b[:n])
		sb.Write(chunk[:m])
		b = b[n:]
	}
	clear(chunk[:])
	return sb.String()
}

// b64 decodes the base64 of a field or header: standard alphabet, padded,
// canonical. The decoder skips CR and LF even in strict mode; b64 refuses
// them, so that "YQ==\n" is not a second spelling of "YQ==".
func b64(field, s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, badRequest("invalid_base64", field+" must be canonical standard base64 (RFC 4648 section 4, with padding), without line breaks")
	}
	b, err := strictBase64.DecodeString(s)
	if err != nil {
		return nil, badRequest("invalid_base64", field+" must be canonical standard base64 (RFC 4648 section 4, with padding, zero padding bits)")
	}
	return b, nil
}

// pathID parses the {id} of the route: an id of 32 hex digits, else a 400
// naming what kind of id it should be.
func pathID(r *http.Request, what string) (shredd.ID, error) {
	id, err := shredd.ParseID(chi.URLParam(r, "id"))
	if err != nil {
		return id, badRequest("invalid_id", what+" ids are 32 hex digits")
	}
	return id, nil
}

func parseIDs(field string, ss []string) ([]shredd.ID, error) {
	out := make([]shredd.ID, 0, len(ss))
	for _, s := range ss {
		id, err := shredd.ParseID(s)
		if err != nil {
			return nil, badRequest("invalid_id", field+" must hold artifact ids of 32 hex digits")
		}
		out = append(out, id)
	}
	return out, nil
}
