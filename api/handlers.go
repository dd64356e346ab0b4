package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd"
)

// sealHandlers serve the sealing routes: encrypt, decrypt and data keys,
// as JSON (single or batch) and as raw bodies.
type sealHandlers struct {
	*codec
	svc shredd.Sealer
}

// artifactHandlers serve the Sealer's bookkeeping routes: kinds, the
// artifacts it registers and reads, its leases and the reregister repair.
// Every call is asked of the Sealer (which keeps them in package registry);
// the sealing itself is sealHandlers'.
type artifactHandlers struct {
	*codec
	svc shredd.Sealer
}

type kindBody struct {
	Description string `json:"description"`
}

func (ah *artifactHandlers) putKind(w http.ResponseWriter, r *http.Request) {
	var req kindBody
	if r.ContentLength != 0 {
		if err := ah.decode(r, &req); err != nil {
			ah.fail(w, r, err)
			return
		}
	}
	k, created, err := ah.svc.PutKind(r.Context(), chi.URLParam(r, "kind"), req.Description)
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, k)
}

func (ah *artifactHandlers) listKinds(w http.ResponseWriter, r *http.Request) {
	ks, err := ah.svc.Kinds(r.Context())
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"kinds": ks})
}

// sourceBody names what an artifact derives from.
type sourceBody struct {
	Subject  string   `json:"subject,omitempty"`
	Subjects []string `json:"subjects,omitempty"`
	Parents  []string `json:"parents,omitempty"`
	Leases   []string `json:"leases,omitempty"`
	Kind     string   `json:"kind"`
	Holder   string   `json:"holder,omitempty"`
	// The writer's reads (docs/api.md "What a read costs a writer").
	Unit          string   `json:"unit,omitempty"`
	Independent   bool     `json:"independent,omitempty"`
	IndependentOf []string `json:"independent_of,omitempty"`
}

// forToken is source for the request's token: a holder-bound token acts as
// its own holder (actAs), and may name no other; the write is checked
// against the token's reads (withReader).
func (b sourceBody) forToken(ctx context.Context) (shredd.Source, error) {
	holder, err := actAs(ctx, b.Holder)
	if err != nil {
		return shredd.Source{}, err
	}
	b.Holder = holder
	src, err := b.source()
	if err != nil {
		return src, err
	}
	return withReader(ctx, src), nil
}

// withReader makes src the write of the request's token: checked against
// the reads of the same reader (readerOf) made before the request's body
// was read (bodyReadAt: a decrypt answered later cannot have fed it), with
// the token's policy for undeclared ones.
func withReader(ctx context.Context, src shredd.Source) shredd.Source {
	if t := tokenOf(ctx); t != nil {
		src.Reader, src.InheritReads, src.ReadsBefore = readerOf(t), t.Reads == shredd.ReadsInherit, bodyReadAt(ctx)
	}
	return src
}

type bodyReadKey struct{}

// withBodyRead marks ctx with now, when the request's body has been read
// in whole: the items of a batch share that time, and so the read of
// their writer's reads (sealing reads it once per writer and time).
func withBodyRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, bodyReadKey{}, time.Now())
}

// bodyReadAt is the time withBodyRead marked, or now (a single request,
// whose body its handler has read by the time it asks).
func bodyReadAt(ctx context.Context) time.Time {
	if at, ok := ctx.Value(bodyReadKey{}).(time.Time); ok {
		return at
	}
	return time.Now()
}

// checkUnit refuses a unit of work id (field's value) that is not 1 to 64
// characters of A-Z a-z 0-9 . _ : - (shredd.ValidUnit); "" is none.
func checkUnit(field, unit string) error {
	if unit != "" && !shredd.ValidUnit(unit) {
		return badRequest("invalid_request", field+": 1 to 64 characters of A-Z a-z 0-9 . _ : -")
	}
	return nil
}

// reader is who a decrypt of the request's token hands plaintext to.
func reader(ctx context.Context, holder, unit string) shredd.Reader {
	who := shredd.Reader{Holder: holder, Unit: unit}
	if t := tokenOf(ctx); t != nil {
		who.Token = readerOf(t)
	}
	return who
}

// readerOf is whom a token's reads are attributed to: the token's id, or,
// for a token bound to a holder, the holder ("holder:" and its id), so
// that every token of one holder answers for the holder's reads (a token
// id is hex: the two never meet).
func readerOf(t *shredd.Token) string {
	if t.Holder != "" {
		return "holder:" + t.Holder
	}
	return t.ID
}

func (b sourceBody) source() (shredd.Source, error) {
	src := shredd.Source{Kind: b.Kind, Holder: b.Holder, Subjects: b.Subjects, Unit: b.Unit, Independent: b.Independent}
	if b.Subject != "" {
		src.Subjects = append([]string{b.Subject}, b.Subjects...)
	}
	ps, err := parseIDs("parents", b.Parents)
	if err != nil {
		return src, err
	}
	src.Parents = ps
	ls, err := parseIDs("leases", b.Leases)
	if err != nil {
		return src, err
	}
	src.Leases = ls
	if src.IndependentOf, err = parseIDs("independent_of", b.IndependentOf); err != nil {
		return src, err
	}
	if err := checkUnit("unit", b.Unit); err != nil {
		return src, err
	}
	if b.Kind == "" {
		return src, badRequest("missing_field", "kind is required")
	}
	return src, nil
}

// encryptRequest is one encrypt: the body of POST /v1/encrypt or an item
// of its batch_input. Its fields are sourceBody's, not embedded, so that
// decoding errors name JSON fields only.
type encryptRequest struct {
	Subject   string   `json:"subject,omitempty"`
	Subjects  []string `json:"subjects,omitempty"`
	Parents   []string `json:"parents,omitempty"`
	Leases    []string `json:"leases,omitempty"`
	Kind      string   `json:"kind"`
	Holder    string   `json:"holder,omitempty"`
	Plaintext string   `json:"plaintext"`
	Context   string   `json:"context,omitempty"`
	// The writer's reads, as sourceBody's.
	Unit          string   `json:"unit,omitempty"`
	Independent   bool     `json:"independent,omitempty"`
	IndependentOf []string `json:"independent_of,omitempty"`
	// plain is the plaintext that the hot decoder decoded from base64
	// straight out of the body (Plaintext is then empty): no copy of the
	// plaintext's base64 outlives the body's buffer, which is cleared once
	// decoded. Nil when Plaintext holds it (the reflective path, or a value
	// with escapes or not strict base64, for b64 to decode or refuse).
	plain []byte
}

// wipe clears the plaintext the hot decoder decoded (a request decoded in
// part, then left to the reflective path, or refused before it runs).
func (req *encryptRequest) wipe() { clear(req.plain) }

type encryptResponse struct {
	Artifact    string   `json:"artifact"`
	Ciphertext  string   `json:"ciphertext"`
	LineageSize int      `json:"lineage_size"`
	Inherited   []string `json:"inherited,omitempty"` // undeclared reads whose lineage the token's policy gave it
}

// idsOrNil is ids in their hex form (idStrings); nil for none.
func idsOrNil(ids []shredd.ID) []string {
	if len(ids) == 0 {
		return nil
	}
	return idStrings(ids)
}

func (s *sealHandlers) encrypt(w http.ResponseWriter, r *http.Request) {
	serveCallMany(s.codec, w, r, s.encryptItem, s.encryptMany)
}

// sealInput validates one encrypt request into the service's input. The
// caller clears the plaintext after use.
func (req *encryptRequest) sealInput(ctx context.Context) (shredd.SealInput, error) {
	src, err := sourceBody{Subject: req.Subject, Subjects: req.Subjects, Parents: req.Parents, Leases: req.Leases, Kind: req.Kind, Holder: req.Holder,
		Unit: req.Unit, Independent: req.Independent, IndependentOf: req.IndependentOf}.forToken(ctx)
	if err != nil {
		req.wipe()
		return shredd.SealInput{}, err
	}
	pt := req.plain
	if pt == nil {
		if pt, err = b64("plaintext", req.Plaintext); err != nil {
			return shredd.SealInput{}, err
		}
	}
	aad, err := b64("context", req.Context)
	if err != nil {
		clear(pt)
		return shredd.SealInput{}, err
	}
	return shredd.SealInput{Source: src, Plaintext: pt, Context: aad}, nil
}

// encryptMany runs the items of an encrypt batch through the service's
// batch path: their registrations are committed together.
func (s *sealHandlers) encryptMany(ctx context.Context, reqs []*encryptRequest) ([]encryptResponse, []error) {
	return runValid(reqs,
		func(req *encryptRequest) (shredd.SealInput, error) { return req.sealInput(ctx) },
		func(in []shredd.SealInput) ([]shredd.Sealed, []error) {
			defer func() {
				for _, it := range in {
					clear(it.Plaintext)
				}
			}()
			return s.svc.EncryptMany(ctx, in)
		},
		func(o shredd.Sealed) encryptResponse {
			return encryptResponse{Artifact: o.Artifact.String(), Ciphertext: o.Ciphertext, LineageSize: o.Lineage, Inherited: idsOrNil(o.Inherited)}
		})
}

// encryptItem validates and runs one encrypt request.
func (s *sealHandlers) encryptItem(ctx context.Context, req *encryptRequest) (encryptResponse, error) {
	in, err := req.sealInput(ctx)
	if err != nil {
		return encryptResponse{}, err
	}
	defer clear(in.Plaintext)
	out, err := s.svc.Encrypt(ctx, in.Source, in.Plaintext, in.Context)
	if err != nil {
		return encryptResponse{}, err
	}
	return encryptResponse{Artifact: out.Artifact.String(), Ciphertext: out.Ciphertext, LineageSize: out.Lineage, Inherited: idsOrNil(out.Inherited)}, nil
}

// decryptRequest is one decrypt: the body of POST /v1/decrypt or an item
// of its batch_input.
type decryptRequest struct {
	Ciphertext string `json:"ciphertext"`
	Context    string `json:"context,omitempty"`
	Holder     string `json:"holder,omitempty"`
	Unit       string `json:"unit,omitempty"` // the reader's unit of work
}

type decryptResponse struct {
	Plaintext string    `json:"plaintext"`
	Artifact  string    `json:"artifact"`
	Kind      string    `json:"kind"`
	Lease     leaseJSON `json:"lease"`
}

// leaseJSON is a lease as the API shows it.
type leaseJSON struct {
	ID         string     `json:"id"`
	Artifact   string     `json:"artifact"`
	Holder     string     `json:"holder,omitempty"`
	Unit       string     `json:"unit,omitempty"`
	IssuedAt   time.Time  `json:"issued_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ReleasedAt *time.Time `json:"released_at,omitempty"`
}

func leaseOf(l shredd.Lease) leaseJSON {
	return leaseJSON{ID: l.ID.String(), Artifact: l.Artifact.String(), Holder: l.Holder, Unit: l.Unit, IssuedAt: l.IssuedAt,
		ExpiresAt: l.ExpiresAt, ReleasedAt: tptr(l.ReleasedAt)}
}

func (s *sealHandlers) decrypt(w http.ResponseWriter, r *http.Request) {
	serveCall(s.codec, w, r, s.decryptItem)
}

// decryptItem validates and runs one decrypt request, alone or in a batch.
func (s *sealHandlers) decryptItem(ctx context.Context, req *decryptRequest) (decryptResponse, error) {
	if req.Ciphertext == "" {
		return decryptResponse{}, badRequest("missing_field", "ciphertext is required")
	}
	aad, err := b64("context", req.Context)
	if err != nil {
		return decryptResponse{}, err
	}
	holder, err := actAs(ctx, req.Holder)
	if err != nil {
		return decryptResponse{}, err
	}
	if err := checkUnit("unit", req.Unit); err != nil {
		return decryptResponse{}, err
	}
	out, err := s.svc.DecryptFor(ctx, req.Ciphertext, aad, reader(ctx, holder, req.Unit))
	if err != nil {
		return decryptResponse{}, err
	}
	defer clear(out.Plaintext)
	return decryptResponse{Plaintext: b64String(out.Plaintext), Artifact: out.Artifact.String(), Kind: out.Kind,
		Lease: leaseOf(out.Lease)}, nil
}

// releaseLease ends a lease early: the holder dropped the plaintext.
func (ah *artifactHandlers) releaseLease(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "lease")
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	holder := ""
	if t := tokenOf(r.Context()); t != nil {
		holder = t.Holder
	}
	l, err := ah.svc.ReleaseLease(r.Context(), id, holder)
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseOf(l))
}

type artifactResponse struct {
	Artifact    string    `json:"artifact"`
	Kind        string    `json:"kind"`
	Holder      string    `json:"holder,omitempty"`
	Sealed      bool      `json:"sealed"`
	Parents     []string  `json:"parents"`
	LineageSize int       `json:"lineage_size"`
	CreatedAt   time.Time `json:"created_at"`
	// Reads are the writer's reads the write was checked against, and how
	// it closed each (named, inherited, independent); omitted when none.
	Reads []readJSON `json:"reads,omitempty"`
}

// readJSON is one read of an artifact's writer (shredd.Read).
type readJSON struct {
	Lease string `json:"lease"`
	How   string `json:"how"`
}

func artifactJSON(a shredd.Artifact) artifactResponse {
	ps := make([]string, len(a.Parents))
	for i, p := range a.Parents {
		ps[i] = p.String()
	}
	out := artifactResponse{Artifact: a.ID.String(), Kind: a.Kind, Holder: a.Holder, Sealed: a.Sealed, Parents: ps,
		LineageSize: a.Lineage, CreatedAt: a.CreatedAt}
	for _, rd := range a.Reads {
		out.Reads = append(out.Reads, readJSON{Lease: rd.Lease.String(), How: rd.How})
	}
	return out
}

func (ah *artifactHandlers) registerArtifact(w http.ResponseWriter, r *http.Request) {
	var req sourceBody
	if err := ah.decode(r, &req); err != nil {
		ah.fail(w, r, err)
		return
	}
	src, err := req.forToken(r.Context())
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	a, err := ah.svc.Register(r.Context(), src)
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifactJSON(a))
}

func (ah *artifactHandlers) getArtifact(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "artifact")
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	a, err := ah.svc.GetArtifact(r.Context(), id)
	if err != nil {
		ah.fail(w, r, err)
		return
	}
	if t := tokenOf(r.Context()); t != nil && t.Holder != "" && a.Holder != t.Holder {
		// A holder-bound token sees only its own artifacts.
		ah.fail(w, r, &problemError{status: http.StatusForbidden, code: "wrong_holder", title: "The token acts for another holder",
			detail: "this token may act only as its own holder"})
		return
	}
	writeJSON(w, http.StatusOK, artifactJSON(a))
}

func tptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
