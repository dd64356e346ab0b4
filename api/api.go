// Package api is shredd's HTTP interface (chi): routes, authentication,
// request limits and the mapping of errors to RFC 9457 problem details. Its
// vocabulary follows Vault's Transit engine (plaintext, ciphertext, context);
// docs/api.md is the reference.
package api

import (
	"bytes"
	"context"
	"crypto/ed25519"
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
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ui"
)

// DefaultMaxBody bounds a request body: 1 MiB of plaintext in base64 plus
// room for the rest of the request.
const DefaultMaxBody = 1<<20*4/3 + 64<<10

// Config configures a Server.
type Config struct {
	Service shredd.Service
	Root    keystore.RootStore // probed by /healthz and /readyz
	Log     *slog.Logger
	// Tokens verifies the bearer tokens of /v1 calls.
	Tokens *Tokens
	// Metrics, when set, counts requests and serves GET /metrics.
	Metrics *Metrics
	// AttestationKey signs erasure attestations (GET
	// /v1/forgets/{id}/attestation); without it the route answers 503.
	AttestationKey ed25519.PrivateKey
	// MaxBody bounds every request body in bytes (DefaultMaxBody when 0),
	// except those of the raw-body routes.
	MaxBody int64
	// MaxRawBody bounds the bodies of the raw-body routes (POST
	// /v1/encrypt/raw, /v1/decrypt/raw) in bytes (DefaultMaxRawBody when 0).
	MaxRawBody int64
	// Disks are the directories shredd writes to, each probed by GET
	// /readyz with a small file (a directory named twice is probed once).
	Disks []Disk
}

// Server serves the HTTP API.
type Server struct {
	svc     shredd.Service
	root    keystore.RootStore
	log     *slog.Logger
	tokens  *Tokens
	metrics *Metrics
	attKey  ed25519.PrivateKey
	maxBody int64
	maxRaw  int64
	disks   []diskCheck
}

// New returns a Server.
func New(c Config) *Server {
	s := &Server{svc: c.Service, root: c.Root, log: c.Log, tokens: c.Tokens, metrics: c.Metrics, attKey: c.AttestationKey, maxBody: c.MaxBody, maxRaw: c.MaxRawBody}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.maxRaw <= 0 {
		s.maxRaw = DefaultMaxRawBody
	}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
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
		s.disks = append(s.disks, diskCheck{name: d.Name, probe: p})
	}
	return s
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
	r.Get("/healthz", s.healthz)
	r.Get("/livez", s.livez)
	r.Get("/readyz", s.readyz)
	r.Get("/v1/openapi.json", s.openAPI) // no token: the document holds no secrets
	s.mountUI(r)
	if s.metrics != nil {
		r.With(s.authenticate, s.require(ScopeAudit)).Get("/metrics", s.metrics.Handler().ServeHTTP)
	}
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.With(s.require(ScopeEncrypt, ScopeDecrypt, ScopeRegister, ScopeAudit)).Get("/kinds", s.listKinds)
		r.With(s.require(ScopeAdmin)).Put("/kinds/{kind}", s.putKind)
		r.With(s.require(ScopeEncrypt)).Post("/encrypt", s.encrypt)
		r.With(s.require(ScopeDecrypt)).Post("/decrypt", s.decrypt)
		r.With(s.require(ScopeEncrypt)).Post("/encrypt/raw", s.encryptRaw)
		r.With(s.require(ScopeEncrypt)).Post("/datakey", s.dataKey)
		r.With(s.require(ScopeDecrypt)).Post("/decrypt/raw", s.decryptRaw)
		r.With(s.require(ScopeDecrypt)).Post("/leases/{id}/release", s.releaseLease)
		r.With(s.require(ScopeRegister)).Post("/artifacts", s.registerArtifact)
		r.With(s.require(ScopeAdmin)).Post("/artifacts/reregister", s.reregister)
		r.With(s.require(ScopeRegister, ScopeAudit)).Get("/artifacts/{id}", s.getArtifact)
		r.With(s.require(ScopeForget)).Post("/forget", s.forget)
		r.With(s.require(ScopeForget, ScopeAudit)).Get("/forgets", s.listForgets)
		r.With(s.require(ScopeForget, ScopeAudit)).Get("/forgets/{id}", s.getForget)
		r.With(s.require(ScopeForget, ScopeAudit)).Post("/forgets/{id}/verify", s.verifyForget)
		r.With(s.require(ScopeForget, ScopeAudit)).Get("/forgets/{id}/attestation", s.attestation)
		r.With(s.require(ScopeForget, ScopeAudit)).Get("/forgets/{id}/export", s.export)
		r.With(s.require(ScopeAudit)).Get("/log/checkpoint", s.logCheckpoint)
		r.With(s.require(ScopeAudit)).Get("/log/key", s.logKey)
		r.With(s.require(ScopeAudit)).Get("/log/tile/*", s.logTile)
		r.With(s.require(ScopeAudit)).Get("/log/proof/{index}", s.logProof)
		r.With(s.require(ScopeAudit)).Get("/log/consistency", s.logConsistency)
		r.With(s.require(ScopeRegister)).Post("/forgets/{id}/acks", s.ack)
		r.With(s.require(ScopeAdmin)).Post("/holders", s.registerHolder)
		r.With(s.require(ScopeRegister, ScopeAudit)).Get("/holders", s.listHolders)
		r.With(s.require(ScopeRegister, ScopeAudit)).Get("/holders/{id}/purges", s.purges)
		r.With(s.require(ScopeRegister)).Post("/holders/{id}/inventory", s.inventory)
		r.With(s.require(ScopeAdmin)).Post("/epoch", s.epoch)
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
func (s *Server) decode(r *http.Request, v any) error {
	body, err := s.readBody(r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// readBody reads a request body of content type application/json, within
// the body limit.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, &problemError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", title: "Content-Type must be application/json"}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &problemError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", title: "Request body too large",
				detail: "request bodies are limited to " + strconv.FormatInt(s.maxBody, 10) + " bytes"}
		}
		return nil, badRequest("bad_body", "the request body could not be read")
	}
	return body, nil
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
