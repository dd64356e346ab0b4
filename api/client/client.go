// Package client is the Go client of shredd's HTTP API (docs/api.md; the
// OpenAPI document is api/openapi.json, served at GET /v1/openapi.json).
//
// Binary values (plaintexts, contexts) are []byte: the client encodes and
// decodes the API's base64. Every error the server answers is a *Error
// carrying its problem details; IsShredded tells apart data that was
// cryptographically erased (410) from every other failure.
//
//	c, err := client.New("http://127.0.0.1:7750", token)
//	sealed, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: pt})
//	opened, err := c.Decrypt(ctx, client.DecryptRequest{Ciphertext: sealed.Ciphertext})
//	if client.IsShredded(err) { ... the data is erased ... }
//
// Reads are lineage: until a decrypt's lease expires, every write of the
// same token answers for it (names it, or declares itself independent of
// it), or the server refuses the write (IsUndeclaredDerivation). A Unit
// (c.Unit()) carries one task's reads into its writes.
//
// The client never retries: an encrypt that failed in transit may have
// registered its artifact, and only the caller knows whether to try again.
package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultURL is the address of a shredd server started with no flags.
const DefaultURL = "http://127.0.0.1:7750"

// MaxBatch is the most items one EncryptBatch or DecryptBatch call may hold.
const MaxBatch = 1000

// DefaultMaxResponse bounds the body of a response the client reads.
const DefaultMaxResponse = 256 << 20

// Forget states.
const (
	StateRequested = "requested"
	StateCommitted = "committed"
	StateShredded  = "shredded"
	StateErased    = "erased"  // every condition of erasure proven; the attestation exists
	StateBlocked   = "blocked" // a condition failed (an unregistered or falsely acked artifact)
	StateOverdue   = "overdue" // the deadline passed before erasure
)

// Client calls one shredd server. It is safe for concurrent use.
type Client struct {
	base    string // scheme://host[/prefix], no trailing slash
	token   string
	hc      *http.Client
	ua      string
	maxResp int64
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (for TLS
// settings, proxies, timeouts). The default is an http.Client with a
// one-minute timeout; contexts bound each call further.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent of the requests.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithMaxResponse bounds the response bodies the client reads, in bytes
// (DefaultMaxResponse by default).
func WithMaxResponse(n int64) Option { return func(c *Client) { c.maxResp = n } }

// New returns a client of the server at baseURL (an http or https URL, with
// an optional path prefix when a proxy serves shredd under one) that sends
// token as its bearer token. An empty token sends none: only Health works
// without one.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("shredd: base URL %q: want http(s)://host[:port][/prefix]", baseURL)
	}
	if u.User != nil {
		return nil, errors.New("shredd: the base URL must not hold credentials: pass the token")
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), token: token, ua: "shredd-go-client/1",
		hc: &http.Client{Timeout: time.Minute}, maxResp: DefaultMaxResponse}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		return nil, errors.New("shredd: WithHTTPClient(nil)")
	}
	return c, nil
}

// Error is an error the server answered: its RFC 9457 problem details, or
// for a response that held none (a proxy's error page), the HTTP status.
type Error struct {
	Status    int    `json:"status"`
	Code      string `json:"code"` // stable, for machines ("shredded", "not_found", ...); "" when the body held no problem
	Title     string `json:"title"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"` // the server log holds the full cause under it
	Type      string `json:"type,omitempty"`
	// Leases lists, for a 409 undeclared_derivation
	// (IsUndeclaredDerivation), the ids of the reads the write neither
	// named nor declared independent of (at most 100, sorted): the
	// problem's extension member "leases".
	Leases []string `json:"leases,omitempty"`
	// Op is the call that failed ("POST /v1/decrypt", with the item of a
	// batch).
	Op string `json:"-"`
}

// Error formats the problem: operation, status, code, title, the server's
// safe detail and the request id.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("shredd: ")
	if e.Op != "" {
		b.WriteString(e.Op + ": ")
	}
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Title != "" {
		b.WriteString(": " + e.Title)
	}
	if e.Detail != "" {
		b.WriteString(" (" + e.Detail + ")")
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// AsError returns the *Error in err's chain, if any. A nil *Error (the Err
// of a batch item that succeeded) is none.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e) && e != nil
	return e, ok
}

func hasStatus(err error, status int) bool {
	e, ok := AsError(err)
	return ok && e.Status == status
}

// IsShredded reports whether err says that a subject of the data's lineage
// was forgotten: the data existed and is cryptographically erased (410).
func IsShredded(err error) bool { return hasStatus(err, http.StatusGone) }

// IsNotFound reports whether err is a 404: no such artifact or forget.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsUnauthorized reports whether err is a 401: no token, or one that is
// unknown, expired or revoked.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is a 403: the token lacks the scope.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

// IsInvalidEnvelope reports whether err is a 422: the ciphertext is not a
// shredd envelope, or does not open (tampered, another context).
func IsInvalidEnvelope(err error) bool { return hasStatus(err, http.StatusUnprocessableEntity) }

// IsUnavailable reports whether err is a 503: the key backend is
// unreachable and nothing was encrypted or decrypted.
func IsUnavailable(err error) bool { return hasStatus(err, http.StatusServiceUnavailable) }

// IsUndeclaredDerivation reports whether err is the refusal of a write
// made while its token held reads it neither named nor declared
// independent of (409 undeclared_derivation; docs/api.md, "What a read
// costs a writer"). The *Error's Leases lists those reads: name them in
// the write's Leases when it was made from them, or in IndependentOf when
// it was not. A Unit names its own reads on every write.
func IsUndeclaredDerivation(err error) bool {
	e, ok := AsError(err)
	return ok && e.Status == http.StatusConflict && e.Code == "undeclared_derivation"
}

// Health is the answer of GET /healthz.
type Health struct {
	Status      string `json:"status"`
	RootStore   string `json:"root_store"` // "local" or "vault"
	RootVersion int    `json:"root_version"`
}

// Kind is a registered artifact kind.
type Kind struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// EncryptRequest is one artifact to seal. It needs a kind and at least one
// subject or parent (or lease).
//
// Every read (decrypt lease) of the same token that is still attributable
// (until the lease's expiry, released or not) and matches the write (same
// holder and unit, or either empty) must be named in Leases or declared in
// IndependentOf, or covered by Independent; otherwise the token's policy
// refuses the write (IsUndeclaredDerivation) or gives it those reads'
// lineage (EncryptResponse.Inherited). A Unit fills Unit and Leases.
type EncryptRequest struct {
	Subjects []string // raw subject ids the artifact is about
	Parents  []string // ids of the artifacts it derives from: their lineage is inherited
	Leases   []string // ids of the decrypt leases it was made from: each acts as a parent
	// IndependentOf lists ids of leases (reads) the artifact was not made
	// from: the declaration is recorded with the artifact.
	IndependentOf []string
	// Independent declares that the artifact derives from no read it does
	// not name in Leases or Parents (recorded with the artifact).
	Independent bool
	// Unit is the unit-of-work label (1-64 of A-Za-z0-9._:-): the write
	// answers only for the reads of the same unit and those without one.
	Unit      string
	Kind      string
	Holder    string // optional: the holder that stores it (a holder-bound token's own by default)
	Plaintext []byte
	Context   []byte // optional: bound into the ciphertext, needed again to decrypt
}

// lineageWire is what the JSON writes (encrypt, datakey, register) say
// about where an artifact comes from.
type lineageWire struct {
	Subjects      []string `json:"subjects,omitempty"`
	Parents       []string `json:"parents,omitempty"`
	Leases        []string `json:"leases,omitempty"`
	IndependentOf []string `json:"independent_of,omitempty"`
	Independent   bool     `json:"independent,omitempty"`
	Unit          string   `json:"unit,omitempty"`
	Kind          string   `json:"kind"`
	Holder        string   `json:"holder,omitempty"`
}

type encryptWire struct {
	lineageWire
	Plaintext []byte `json:"plaintext"`
	Context   []byte `json:"context,omitempty"`
}

func (r EncryptRequest) lineage() lineageWire {
	return lineageWire{Subjects: r.Subjects, Parents: r.Parents, Leases: r.Leases, IndependentOf: r.IndependentOf,
		Independent: r.Independent, Unit: r.Unit, Kind: r.Kind, Holder: r.Holder}
}

func (r EncryptRequest) wire() encryptWire {
	pt := r.Plaintext
	if pt == nil {
		pt = []byte{} // "", not null
	}
	return encryptWire{lineageWire: r.lineage(), Plaintext: pt, Context: r.Context}
}

// EncryptResponse is a sealed artifact.
type EncryptResponse struct {
	Artifact    string `json:"artifact"`
	Ciphertext  string `json:"ciphertext"` // shredd:v1:...
	LineageSize int    `json:"lineage_size"`
	// Inherited lists the reads (lease ids) the write neither named nor
	// declared independent of, whose lineage it was given because its
	// token's policy is "inherit"; empty otherwise.
	Inherited []string `json:"inherited,omitempty"`
}

// EncryptResult is the result of one item of EncryptBatch: Err is set when
// the item failed.
type EncryptResult struct {
	EncryptResponse
	Err *Error `json:"error,omitempty"`
}

// DecryptRequest is one ciphertext to open.
type DecryptRequest struct {
	Ciphertext string
	Context    []byte // the context it was sealed with
	Holder     string // optional: the holder that receives the plaintext, named in the lease
	Unit       string // optional: the unit-of-work label of the read (a Unit sets its own)
}

type decryptWire struct {
	Ciphertext string `json:"ciphertext"`
	Context    []byte `json:"context,omitempty"`
	Holder     string `json:"holder,omitempty"`
	Unit       string `json:"unit,omitempty"`
}

func (r DecryptRequest) wire() decryptWire {
	return decryptWire(r)
}

// Lease records that an artifact's plaintext was handed to a holder, until
// it expires or is released. The read stays attributable to its token,
// holder and unit until ExpiresAt whether or not it was released: a write
// they make before then names it, or declares itself independent of it.
type Lease struct {
	ID         string    `json:"id"`
	Artifact   string    `json:"artifact"`
	Holder     string    `json:"holder,omitempty"`
	Unit       string    `json:"unit,omitempty"`
	IssuedAt   time.Time `json:"issued_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
}

// ReleaseLease ends a lease early: the holder dropped the plaintext (a
// forget no longer waits for it). The read stays attributable to the
// writes of its reader until the lease's expiry.
func (c *Client) ReleaseLease(ctx context.Context, id string) (Lease, error) {
	var out Lease
	_, _, err := c.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/release", nil, &out)
	return out, err
}

// DecryptResponse is an opened ciphertext.
type DecryptResponse struct {
	Plaintext []byte `json:"plaintext"`
	Artifact  string `json:"artifact"`
	Kind      string `json:"kind"`
	Lease     Lease  `json:"lease"`
}

// DecryptResult is the result of one item of DecryptBatch: Err is set when
// the item failed (IsShredded(Err) for an erased one).
type DecryptResult struct {
	DecryptResponse
	Err *Error `json:"error,omitempty"`
}

// RegisterRequest is a plaintext-held artifact to register: one that lives
// outside shredd and that its holder must purge. It needs a kind, at least
// one subject or parent (or lease), and a holder unless the token is bound
// to one. A registration is a write: Leases, IndependentOf, Independent
// and Unit mean what they mean in an EncryptRequest.
type RegisterRequest struct {
	Subjects      []string
	Parents       []string
	Leases        []string
	IndependentOf []string
	Independent   bool
	Unit          string
	Kind          string
	Holder        string
}

func (r RegisterRequest) wire() lineageWire {
	return lineageWire{Subjects: r.Subjects, Parents: r.Parents, Leases: r.Leases, IndependentOf: r.IndependentOf,
		Independent: r.Independent, Unit: r.Unit, Kind: r.Kind, Holder: r.Holder}
}

// Artifact is an artifact's registry record. Subjects are never listed, only
// the lineage size.
type Artifact struct {
	ID          string    `json:"artifact"`
	Kind        string    `json:"kind"`
	Holder      string    `json:"holder,omitempty"`
	Sealed      bool      `json:"sealed"` // a shredd ciphertext; false for a plaintext-held artifact
	Parents     []string  `json:"parents"`
	LineageSize int       `json:"lineage_size"`
	CreatedAt   time.Time `json:"created_at"`
	// Reads are the reads the write that made the artifact answered for,
	// and how each was closed (GET /v1/artifacts/{id}).
	Reads []ArtifactRead `json:"reads,omitempty"`
	// Inherited is, in the answer of Register, what it is in an
	// EncryptResponse.
	Inherited []string `json:"inherited,omitempty"`
}

// ArtifactRead is a read (a decrypt's lease, of Artifact) that a write
// answered for, and How: "named" (in its leases or parents: the write has
// its lineage), "inherited" (given its lineage by the token's policy) or
// "independent" (declared not derived from it).
type ArtifactRead struct {
	Lease    string `json:"lease"`
	Artifact string `json:"artifact"`
	How      string `json:"how"`
}

// How a write closed a read (ArtifactRead.How).
const (
	ReadNamed       = "named"
	ReadInherited   = "inherited"
	ReadIndependent = "independent"
)

// Condition is one requirement of a forget, met ("ok"), not yet
// ("pending") or not provable ("failed"), and the holders it waits on or
// is broken by.
type Condition struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Reason  string   `json:"reason"`
	Holders []string `json:"holders,omitempty"`
}

// Forget is the pending-erasure token of a forget.
type Forget struct {
	ID           string      `json:"forget"`
	State        string      `json:"state"` // one of the State constants
	Overdue      bool        `json:"overdue"`
	Barrier      int64       `json:"barrier"`
	TPropSeconds float64     `json:"t_prop_seconds"`
	Deadline     time.Time   `json:"deadline"`
	RequestedAt  time.Time   `json:"requested_at"`
	CommittedAt  time.Time   `json:"committed_at,omitzero"`
	RekeyedAt    time.Time   `json:"rekeyed_at,omitzero"`
	ShreddedAt   time.Time   `json:"shredded_at,omitzero"`
	ErasedAt     time.Time   `json:"erased_at,omitzero"`
	Epoch        int64       `json:"epoch,omitempty"` // the root epoch that shredded it
	Conditions   []Condition `json:"conditions"`
	// Verification holds the five conditions of erasure.
	Verification []Condition `json:"verification"`
	// CommitmentSalt (hex) opens the subject commitment of the forget's
	// attestation and log entries. Only the answer of the Forget call that
	// created the forget has it: keep it.
	CommitmentSalt string `json:"commitment_salt,omitempty"`
}

// TProp returns the propagation bound: within it, every node stops serving
// the forgotten subject's key.
func (f Forget) TProp() time.Duration { return time.Duration(f.TPropSeconds * float64(time.Second)) }

// Epoch is a completed root epoch.
type Epoch struct {
	Epoch       int64     `json:"epoch"`
	RootVersion int       `json:"root_version"`
	Retired     []int     `json:"retired_versions"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

// Health calls GET /healthz (no token needed).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var out Health
	_, _, err := c.call(ctx, http.MethodGet, "/healthz", nil, &out)
	return out, err
}

// Live calls GET /livez (no token needed): nil when the server answers at
// all.
func (c *Client) Live(ctx context.Context) error {
	var out map[string]any
	_, _, err := c.call(ctx, http.MethodGet, "/livez", nil, &out)
	return err
}

// Ready calls GET /readyz (no token needed): nil when the database accepts
// a write and the root store answers; otherwise the *Error of 503
// not_ready, whose Detail names the part that failed.
func (c *Client) Ready(ctx context.Context) error {
	var out map[string]any
	_, _, err := c.call(ctx, http.MethodGet, "/readyz", nil, &out)
	return err
}

// Kinds lists the registered kinds, by name.
func (c *Client) Kinds(ctx context.Context) ([]Kind, error) {
	var out struct {
		Kinds []Kind `json:"kinds"`
	}
	_, _, err := c.call(ctx, http.MethodGet, "/v1/kinds", nil, &out)
	return out.Kinds, err
}

// PutKind registers a kind, or updates the description of an existing one;
// created reports whether the kind is new.
func (c *Client) PutKind(ctx context.Context, name, description string) (k Kind, created bool, err error) {
	if name == "" {
		return Kind{}, false, errors.New("shredd: PutKind: empty kind name")
	}
	status, _, err := c.call(ctx, http.MethodPut, "/v1/kinds/"+url.PathEscape(name), map[string]string{"description": description}, &k)
	return k, status == http.StatusCreated, err
}

// Encrypt seals a new artifact.
func (c *Client) Encrypt(ctx context.Context, req EncryptRequest) (EncryptResponse, error) {
	var out EncryptResponse
	_, _, err := c.call(ctx, http.MethodPost, "/v1/encrypt", req.wire(), &out)
	return out, err
}

// EncryptBatch seals up to MaxBatch artifacts in one call. It returns one
// result per request, in order; an item that failed has Err set, and the
// others took effect (items are not rolled back). The error is for the call
// as a whole.
func (c *Client) EncryptBatch(ctx context.Context, reqs []EncryptRequest) ([]EncryptResult, error) {
	in := struct {
		BatchInput []encryptWire `json:"batch_input"`
	}{make([]encryptWire, len(reqs))}
	for i, r := range reqs {
		in.BatchInput[i] = r.wire()
	}
	var out struct {
		BatchResults []EncryptResult `json:"batch_results"`
	}
	_, hdr, err := c.call(ctx, http.MethodPost, "/v1/encrypt", in, &out)
	if err != nil {
		return nil, err
	}
	if len(out.BatchResults) != len(reqs) {
		return nil, fmt.Errorf("shredd: POST /v1/encrypt: %d results for %d items", len(out.BatchResults), len(reqs))
	}
	for i := range out.BatchResults {
		itemError(out.BatchResults[i].Err, "POST /v1/encrypt", i, hdr)
	}
	return out.BatchResults, nil
}

// Decrypt opens a ciphertext. IsShredded(err) when a subject of its lineage
// was forgotten.
func (c *Client) Decrypt(ctx context.Context, req DecryptRequest) (DecryptResponse, error) {
	var out DecryptResponse
	_, _, err := c.call(ctx, http.MethodPost, "/v1/decrypt", req.wire(), &out)
	return out, err
}

// DecryptBatch opens up to MaxBatch ciphertexts in one call. It returns one
// result per request, in order; an item that failed has Err set. The error
// is for the call as a whole.
func (c *Client) DecryptBatch(ctx context.Context, reqs []DecryptRequest) ([]DecryptResult, error) {
	in := struct {
		BatchInput []decryptWire `json:"batch_input"`
	}{make([]decryptWire, len(reqs))}
	for i, r := range reqs {
		in.BatchInput[i] = r.wire()
	}
	var out struct {
		BatchResults []DecryptResult `json:"batch_results"`
	}
	_, hdr, err := c.call(ctx, http.MethodPost, "/v1/decrypt", in, &out)
	if err != nil {
		return nil, err
	}
	if len(out.BatchResults) != len(reqs) {
		return nil, fmt.Errorf("shredd: POST /v1/decrypt: %d results for %d items", len(out.BatchResults), len(reqs))
	}
	for i := range out.BatchResults {
		itemError(out.BatchResults[i].Err, "POST /v1/decrypt", i, hdr)
	}
	return out.BatchResults, nil
}

// itemError completes the error of batch item i, if any, with what the
// batch response tells.
func itemError(e *Error, op string, i int, hdr http.Header) {
	if e == nil {
		return
	}
	e.Op = op + " (item " + strconv.Itoa(i) + ")"
	e.RequestID = hdr.Get("X-Request-Id")
	if e.Type == "" && e.Code != "" {
		e.Type = "urn:shredd:problem:" + e.Code
	}
}

// Register registers a plaintext-held artifact.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (Artifact, error) {
	var out Artifact
	_, _, err := c.call(ctx, http.MethodPost, "/v1/artifacts", req.wire(), &out)
	return out, err
}

// Artifact looks up an artifact by id.
func (c *Client) Artifact(ctx context.Context, id string) (Artifact, error) {
	var out Artifact
	_, _, err := c.call(ctx, http.MethodGet, "/v1/artifacts/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Forget forgets a subject and returns the pending-erasure token. Forgetting
// the same subject again returns the same forget.
func (c *Client) Forget(ctx context.Context, subject string) (Forget, error) {
	var out Forget
	_, _, err := c.call(ctx, http.MethodPost, "/v1/forget", map[string]string{"subject": subject}, &out)
	return out, err
}

// Reinstatement is a forgotten subject's new key generation (Reinstate).
// It names no subject.
type Reinstatement struct {
	Generation         uint32    `json:"generation"`
	PreviousGeneration uint32    `json:"previous_generation"` // destroyed by Forget (0: the subject never had a key)
	Forget             string    `json:"forget"`              // the forget it follows, unchanged
	LogIndex           int64     `json:"log_index"`           // its subject_reinstated log entry, -1 without a log
	ReinstatedAt       time.Time `json:"reinstated_at"`
}

// Subjects are the operator's calls on a subject's life, beside the
// Client's (an admin token): NewSubjects(c).Reinstate.
type Subjects struct{ c *Client }

// NewSubjects returns the subject calls of c.
func NewSubjects(c *Client) Subjects { return Subjects{c} }

// Reinstate gives a forgotten subject a new key generation (POST
// /v1/subjects/reinstate, an admin token). The subject's forget must be
// erased (409 not_erased before); a subject without a committed forget to
// follow (live, reinstated already, never seen) is 409 not_forgotten, so a
// retried call never starts another generation. reason is kept with the
// reinstatement and never logged: put no personal data in it.
func (s Subjects) Reinstate(ctx context.Context, subject, reason string) (Reinstatement, error) {
	var out Reinstatement
	body := map[string]string{"subject": subject}
	if reason != "" {
		body["reason"] = reason
	}
	_, _, err := s.c.call(ctx, http.MethodPost, "/v1/subjects/reinstate", body, &out)
	return out, err
}

// Preview is the dry run of a forget: what it would make unreadable.
type Preview struct {
	DryRun           bool `json:"dry_run"`
	AlreadyForgotten bool `json:"already_forgotten"`
	Counts           struct {
		Total         int `json:"total"`
		Direct        int `json:"direct"`
		Derived       int `json:"derived"`
		Collateral    int `json:"collateral"`
		PlaintextHeld int `json:"plaintext_held"`
	} `json:"counts"`
	Truncated bool              `json:"truncated"`
	Artifacts []PreviewArtifact `json:"artifacts"`
}

// PreviewArtifact is one artifact a forget would make unreadable: Hops
// from the subject's own artifacts (0), Collateral when it also belongs
// to OtherSubjects other subjects, Sealed false when a holder keeps its
// plaintext.
type PreviewArtifact struct {
	Artifact      string `json:"artifact"`
	Kind          string `json:"kind"`
	Holder        string `json:"holder,omitempty"`
	Sealed        bool   `json:"sealed"`
	Hops          int    `json:"hops"`
	Collateral    bool   `json:"collateral"`
	OtherSubjects int    `json:"other_subjects"`
}

// ForgetPreview asks what forgetting subject would touch (POST /v1/forget
// with dry_run), changing nothing.
func (c *Client) ForgetPreview(ctx context.Context, subject string) (Preview, error) {
	var out Preview
	_, _, err := c.call(ctx, http.MethodPost, "/v1/forget", map[string]any{"subject": subject, "dry_run": true}, &out)
	return out, err
}

// Forgets lists the forgets, newest first (at most 1,000), in state when it
// is not "".
func (c *Client) Forgets(ctx context.Context, state string) ([]Forget, error) {
	path := "/v1/forgets"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	var out struct {
		Forgets []Forget `json:"forgets"`
	}
	_, _, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out.Forgets, err
}

// GetForget returns the current token of a forget.
func (c *Client) GetForget(ctx context.Context, id string) (Forget, error) {
	var out Forget
	_, _, err := c.call(ctx, http.MethodGet, "/v1/forgets/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Attestation returns the erasure attestation file of an erased forget,
// byte for byte (forget or audit scope; docs/attestation.md).
func (c *Client) Attestation(ctx context.Context, forget string) ([]byte, error) {
	return c.getBytes(ctx, "/v1/forgets/"+url.PathEscape(forget)+"/attestation")
}

// Export returns the regulator export of an erased forget: a gzip tar
// archive (package bundle). since > 0 adds a consistency proof from that
// tree size (forget or audit scope).
func (c *Client) Export(ctx context.Context, forget string, since int64) ([]byte, error) {
	path := "/v1/forgets/" + url.PathEscape(forget) + "/export"
	if since > 0 {
		path += "?since=" + strconv.FormatInt(since, 10)
	}
	return c.getBytes(ctx, path)
}

// getBytes answers a GET of path: the body as it is.
func (c *Client) getBytes(ctx context.Context, path string) ([]byte, error) {
	var out []byte
	_, _, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Checkpoint returns the transparency log's current signed checkpoint
// (audit scope).
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.getBytes(ctx, "/v1/log/checkpoint")
}

// Verify evaluates a forget's conditions of erasure now and returns it,
// erased when they all hold (forget or audit scope).
func (c *Client) Verify(ctx context.Context, id string) (Forget, error) {
	var out Forget
	_, _, err := c.call(ctx, http.MethodPost, "/v1/forgets/"+url.PathEscape(id)+"/verify", nil, &out)
	return out, err
}

// Epoch runs a root epoch now (admin scope).
func (c *Client) Epoch(ctx context.Context) (Epoch, error) {
	var out Epoch
	_, _, err := c.call(ctx, http.MethodPost, "/v1/epoch", nil, &out)
	return out, err
}

// call sends one request (in as its JSON body, when not nil) and decodes a
// 2xx answer into out; any other answer is an *Error. It returns the status
// and the headers of the response. The request and
// response bodies, which may hold plaintext, are cleared after use.
func (c *Client) call(ctx context.Context, method, path string, in, out any) (int, http.Header, error) {
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, nil, fmt.Errorf("shredd: %s: %w", op, err)
		}
		defer clear(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("shredd: %s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.send(req, op)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResp+1))
	defer clear(raw)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("shredd: %s: reading the response: %w", op, err)
	}
	if int64(len(raw)) > c.maxResp {
		return resp.StatusCode, nil, fmt.Errorf("shredd: %s: the response is over %d bytes", op, c.maxResp)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, resp.Header, problem(op, resp, raw)
	}
	if b, ok := out.(*[]byte); ok { // a file (attestation, export, checkpoint): kept byte for byte
		*b = bytes.Clone(raw)
		return resp.StatusCode, resp.Header, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("shredd: %s: %d response is not the expected JSON: %w", op, resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header, nil
}

// problem makes the *Error of a failed response.
func problem(op string, resp *http.Response, raw []byte) *Error {
	e := &Error{Op: op}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		_ = json.Unmarshal(raw, e)
	}
	e.Op, e.Status = op, resp.StatusCode // the status line is the authority
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-Id")
	}
	return e
}

// RawEncryptResponse is the answer of EncryptRaw.
type RawEncryptResponse struct {
	Artifact    string
	Envelope    []byte // the binary envelope; envelope.Parse reads it
	LineageSize int
	Inherited   []string // as in EncryptResponse
}

// RawDecryptResponse is the answer of DecryptRaw.
type RawDecryptResponse struct {
	Artifact  string
	Kind      string
	Plaintext []byte
	LeaseID   string
	LeaseEnds time.Time
}

// EncryptRaw seals req.Plaintext through POST /v1/encrypt/raw: the
// plaintext and the answer travel as raw bytes (no base64), for large
// payloads. The answer is the binary form of the envelope, which
// DecryptRaw opens. Subjects, parents, leases, the declarations of
// independence, unit, kind, holder and context go in request headers,
// never in the URL.
func (c *Client) EncryptRaw(ctx context.Context, req EncryptRequest) (RawEncryptResponse, error) {
	h := http.Header{}
	for _, s := range req.Subjects {
		h.Add("Shredd-Subject", s)
	}
	for _, p := range req.Parents {
		h.Add("Shredd-Parent", p)
	}
	for _, l := range req.Leases {
		h.Add("Shredd-Lease", l)
	}
	for _, l := range req.IndependentOf {
		h.Add("Shredd-Independent-Of", l)
	}
	if req.Independent {
		h.Set("Shredd-Independent", "true")
	}
	if req.Unit != "" {
		h.Set("Shredd-Unit", req.Unit)
	}
	h.Set("Shredd-Kind", req.Kind)
	if req.Holder != "" {
		h.Set("Shredd-Holder", req.Holder)
	}
	if len(req.Context) > 0 {
		h.Set("Shredd-Context", base64.StdEncoding.EncodeToString(req.Context))
	}
	b, rh, err := c.callRaw(ctx, "/v1/encrypt/raw", h, req.Plaintext)
	if err != nil {
		return RawEncryptResponse{}, err
	}
	n, _ := strconv.Atoi(rh.Get("Shredd-Lineage-Size"))
	var inherited []string
	for _, l := range rh.Values("Shredd-Inherited") {
		for _, id := range strings.Split(l, ",") {
			if id = strings.TrimSpace(id); id != "" {
				inherited = append(inherited, id)
			}
		}
	}
	return RawEncryptResponse{Artifact: rh.Get("Shredd-Artifact"), Envelope: b, LineageSize: n, Inherited: inherited}, nil
}

// DecryptRaw opens a binary envelope (what EncryptRaw answers) through POST
// /v1/decrypt/raw. IsShredded(err) when a subject of its lineage was
// forgotten. The caller should clear the plaintext after use.
func (c *Client) DecryptRaw(ctx context.Context, envelope, context []byte, holder string) (RawDecryptResponse, error) {
	return c.decryptRaw(ctx, envelope, context, holder, "")
}

// decryptRaw is DecryptRaw with the read's unit label (none when "").
func (c *Client) decryptRaw(ctx context.Context, envelope, context []byte, holder, unit string) (RawDecryptResponse, error) {
	h := http.Header{}
	if holder != "" {
		h.Set("Shredd-Holder", holder)
	}
	if unit != "" {
		h.Set("Shredd-Unit", unit)
	}
	if len(context) > 0 {
		h.Set("Shredd-Context", base64.StdEncoding.EncodeToString(context))
	}
	b, rh, err := c.callRaw(ctx, "/v1/decrypt/raw", h, envelope)
	if err != nil {
		return RawDecryptResponse{}, err
	}
	exp, _ := time.Parse(time.RFC3339Nano, rh.Get("Shredd-Lease-Expires"))
	return RawDecryptResponse{Artifact: rh.Get("Shredd-Artifact"), Kind: rh.Get("Shredd-Kind"), Plaintext: b,
		LeaseID: rh.Get("Shredd-Lease"), LeaseEnds: exp}, nil
}

// send adds the user agent and the token to req and sends it; op names
// the call in the error.
func (c *Client) send(req *http.Request, op string) (*http.Response, error) {
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// The *url.Error would repeat the method and the URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("shredd: %s: %w", op, err)
	}
	return resp, nil
}

// callRaw posts body as application/octet-stream with the headers h and
// returns a 2xx answer's body and headers; any other answer is an *Error.
func (c *Client) callRaw(ctx context.Context, path string, h http.Header, body []byte) ([]byte, http.Header, error) {
	op := http.MethodPost + " " + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("shredd: %s: %w", op, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/octet-stream, application/problem+json")
	resp, err := c.send(req, op)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	size := c.maxResp + 1
	if resp.ContentLength >= 0 && resp.ContentLength < size {
		size = resp.ContentLength + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := io.Copy(buf, io.LimitReader(resp.Body, c.maxResp+1)); err != nil {
		clear(buf.Bytes())
		return nil, nil, fmt.Errorf("shredd: %s: reading the response: %w", op, err)
	}
	raw := buf.Bytes()
	if int64(len(raw)) > c.maxResp {
		clear(raw)
		return nil, nil, fmt.Errorf("shredd: %s: the response is over %d bytes", op, c.maxResp)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, resp.Header, problem(op, resp, raw)
	}
	return raw, resp.Header, nil
}

// ReregisterRequest is one envelope to register again after a restore
// (Reregister): its text form, the context it was sealed with, and the
// holder to record (optional).
type ReregisterRequest struct {
	Ciphertext string
	Context    []byte
	Holder     string
}

type reregisterWire struct {
	Ciphertext string `json:"ciphertext"`
	Context    []byte `json:"context,omitempty"`
	Holder     string `json:"holder,omitempty"`
}

// Reregistered is the artifact an envelope's authenticated header names,
// and Status "registered" (written now) or "known" (the registry held it
// already).
type Reregistered struct {
	Artifact    string `json:"artifact"`
	Kind        string `json:"kind"`
	LineageSize int    `json:"lineage_size"`
	Status      string `json:"status"`
}

// ReregisterResult is the result of one item of Reregister: Err is set
// when the item was refused (IsShredded(Err) for a lineage that holds a
// forgotten subject, IsInvalidEnvelope(Err) for an envelope that does not
// open).
type ReregisterResult struct {
	Reregistered
	Err *Error `json:"error,omitempty"`
}

// Reregister registers again, in one call of up to MaxBatch envelopes, the
// artifacts that decrypt answers 409 unknown_artifact for: those sealed
// after the backup the server's database was restored from (POST
// /v1/artifacts/reregister, admin scope). The server trusts only each
// envelope's authenticated header. It returns one result per request, in
// order; the error is for the call as a whole.
func (c *Client) Reregister(ctx context.Context, reqs []ReregisterRequest) ([]ReregisterResult, error) {
	in := struct {
		BatchInput []reregisterWire `json:"batch_input"`
	}{make([]reregisterWire, len(reqs))}
	for i, r := range reqs {
		in.BatchInput[i] = reregisterWire(r)
	}
	var out struct {
		BatchResults []ReregisterResult `json:"batch_results"`
	}
	const op = "POST /v1/artifacts/reregister"
	_, hdr, err := c.call(ctx, http.MethodPost, "/v1/artifacts/reregister", in, &out)
	if err != nil {
		return nil, err
	}
	if len(out.BatchResults) != len(reqs) {
		return nil, fmt.Errorf("shredd: %s: %d results for %d items", op, len(out.BatchResults), len(reqs))
	}
	for i := range out.BatchResults {
		itemError(out.BatchResults[i].Err, op, i, hdr)
	}
	return out.BatchResults, nil
}

// IsUnknownArtifact reports whether err is the server's refusal to open a
// ciphertext whose artifact its registry does not hold (409
// unknown_artifact): the database is older than the ciphertext, and an
// operator can register it again (Reregister).
func IsUnknownArtifact(err error) bool {
	e, ok := AsError(err)
	return ok && e.Status == http.StatusConflict && e.Code == "unknown_artifact"
}
