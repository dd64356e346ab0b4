package api

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	v, err := s.root.Versions(r.Context())
	if err != nil {
		s.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "backend_unavailable", title: "The root store is unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "root_store": s.root.Kind(), "root_version": v.Latest})
}

type kindBody struct {
	Description string `json:"description"`
}

func (s *Server) putKind(w http.ResponseWriter, r *http.Request) {
	var req kindBody
	if r.ContentLength != 0 {
		if err := s.decode(r, &req); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	k, created, err := s.svc.PutKind(r.Context(), chi.URLParam(r, "kind"), req.Description)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, k)
}

func (s *Server) listKinds(w http.ResponseWriter, r *http.Request) {
	ks, err := s.svc.Kinds(r.Context())
	if err != nil {
		s.fail(w, r, err)
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
}

// forToken is source for the request's token: a holder-bound token acts as
// its own holder (actAs), and may name no other.
func (b sourceBody) forToken(ctx context.Context) (shredd.Source, error) {
	holder, err := actAs(ctx, b.Holder)
	if err != nil {
		return shredd.Source{}, err
	}
	b.Holder = holder
	return b.source()
}

func (b sourceBody) source() (shredd.Source, error) {
	src := shredd.Source{Kind: b.Kind, Holder: b.Holder, Subjects: b.Subjects}
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
}

type encryptResponse struct {
	Artifact    string `json:"artifact"`
	Ciphertext  string `json:"ciphertext"`
	LineageSize int    `json:"lineage_size"`
}

func (s *Server) encrypt(w http.ResponseWriter, r *http.Request) {
	serveCallMany(s, w, r, s.encryptItem, s.encryptMany)
}

// sealInput validates one encrypt request into the service's input. The
// caller clears the plaintext after use.
func (req *encryptRequest) sealInput(ctx context.Context) (shredd.SealInput, error) {
	src, err := sourceBody{Subject: req.Subject, Subjects: req.Subjects, Parents: req.Parents, Leases: req.Leases, Kind: req.Kind, Holder: req.Holder}.forToken(ctx)
	if err != nil {
		return shredd.SealInput{}, err
	}
	pt, err := b64("plaintext", req.Plaintext)
	if err != nil {
		return shredd.SealInput{}, err
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
func (s *Server) encryptMany(ctx context.Context, reqs []*encryptRequest) ([]encryptResponse, []error) {
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
			return encryptResponse{Artifact: o.Artifact.String(), Ciphertext: o.Ciphertext, LineageSize: o.Lineage}
		})
}

// encryptItem validates and runs one encrypt request.
func (s *Server) encryptItem(ctx context.Context, req *encryptRequest) (encryptResponse, error) {
	in, err := req.sealInput(ctx)
	if err != nil {
		return encryptResponse{}, err
	}
	defer clear(in.Plaintext)
	out, err := s.svc.Encrypt(ctx, in.Source, in.Plaintext, in.Context)
	if err != nil {
		return encryptResponse{}, err
	}
	return encryptResponse{Artifact: out.Artifact.String(), Ciphertext: out.Ciphertext, LineageSize: out.Lineage}, nil
}

// decryptRequest is one decrypt: the body of POST /v1/decrypt or an item
// of its batch_input.
type decryptRequest struct {
	Ciphertext string `json:"ciphertext"`
	Context    string `json:"context,omitempty"`
	Holder     string `json:"holder,omitempty"`
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
	IssuedAt   time.Time  `json:"issued_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ReleasedAt *time.Time `json:"released_at,omitempty"`
}

func leaseOf(l shredd.Lease) leaseJSON {
	return leaseJSON{ID: l.ID.String(), Artifact: l.Artifact.String(), Holder: l.Holder, IssuedAt: l.IssuedAt,
		ExpiresAt: l.ExpiresAt, ReleasedAt: tptr(l.ReleasedAt)}
}

func (s *Server) decrypt(w http.ResponseWriter, r *http.Request) { serveCall(s, w, r, s.decryptItem) }

// decryptItem validates and runs one decrypt request, alone or in a batch.
func (s *Server) decryptItem(ctx context.Context, req *decryptRequest) (decryptResponse, error) {
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
	out, err := s.svc.DecryptFor(ctx, req.Ciphertext, aad, holder)
	if err != nil {
		return decryptResponse{}, err
	}
	defer clear(out.Plaintext)
	return decryptResponse{Plaintext: base64.StdEncoding.EncodeToString(out.Plaintext), Artifact: out.Artifact.String(), Kind: out.Kind,
		Lease: leaseOf(out.Lease)}, nil
}

// releaseLease ends a lease early: the holder dropped the plaintext.
func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "lease")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	holder := ""
	if t := tokenOf(r.Context()); t != nil {
		holder = t.Holder
	}
	l, err := s.svc.ReleaseLease(r.Context(), id, holder)
	if err != nil {
		s.fail(w, r, err)
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
}

func artifactJSON(a shredd.Artifact) artifactResponse {
	ps := make([]string, len(a.Parents))
	for i, p := range a.Parents {
		ps[i] = p.String()
	}
	return artifactResponse{Artifact: a.ID.String(), Kind: a.Kind, Holder: a.Holder, Sealed: a.Sealed, Parents: ps,
		LineageSize: len(a.Lineage), CreatedAt: a.CreatedAt}
}

func (s *Server) registerArtifact(w http.ResponseWriter, r *http.Request) {
	var req sourceBody
	if err := s.decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	src, err := req.forToken(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := s.svc.Register(r.Context(), src)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifactJSON(a))
}

func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "artifact")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := s.svc.GetArtifact(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if t := tokenOf(r.Context()); t != nil && t.Holder != "" && a.Holder != t.Holder {
		// A holder-bound token sees only its own artifacts.
		s.fail(w, r, &problemError{status: http.StatusForbidden, code: "wrong_holder", title: "The token acts for another holder",
			detail: "this token may act only as its own holder"})
		return
	}
	writeJSON(w, http.StatusOK, artifactJSON(a))
}

type forgetRequest struct {
	Subject string `json:"subject"`
	DryRun  bool   `json:"dry_run,omitempty"`
}

// previewResponse is the dry run of a forget.
type previewResponse struct {
	DryRun           bool              `json:"dry_run"`
	AlreadyForgotten bool              `json:"already_forgotten"`
	Counts           previewCounts     `json:"counts"`
	Truncated        bool              `json:"truncated"`
	Artifacts        []previewArtifact `json:"artifacts"`
}

type previewCounts struct {
	Total         int `json:"total"`
	Direct        int `json:"direct"`
	Derived       int `json:"derived"`
	Collateral    int `json:"collateral"`
	PlaintextHeld int `json:"plaintext_held"`
}

type previewArtifact struct {
	Artifact      string `json:"artifact"`
	Kind          string `json:"kind"`
	Holder        string `json:"holder,omitempty"`
	Sealed        bool   `json:"sealed"`
	Hops          int    `json:"hops"`
	Collateral    bool   `json:"collateral"`
	OtherSubjects int    `json:"other_subjects"`
}

func previewJSON(p shredd.Preview) previewResponse {
	out := previewResponse{DryRun: true, AlreadyForgotten: p.AlreadyForgotten, Truncated: p.Truncated,
		Counts:    previewCounts{Total: p.Total, Direct: p.Direct, Derived: p.Derived, Collateral: p.Collateral, PlaintextHeld: p.PlaintextHeld},
		Artifacts: make([]previewArtifact, len(p.Artifacts))}
	for i, a := range p.Artifacts {
		out.Artifacts[i] = previewArtifact{Artifact: a.ID.String(), Kind: a.Kind, Holder: a.Holder, Sealed: a.Sealed,
			Hops: a.Hops, Collateral: a.Others > 0, OtherSubjects: a.Others}
	}
	return out
}

// forgetResponse is the pending-erasure token.
type forgetResponse struct {
	Forget       string     `json:"forget"`
	State        string     `json:"state"`
	Overdue      bool       `json:"overdue"`
	Barrier      int64      `json:"barrier"`
	TPropSeconds float64    `json:"t_prop_seconds"`
	Deadline     time.Time  `json:"deadline"`
	RequestedAt  time.Time  `json:"requested_at"`
	CommittedAt  *time.Time `json:"committed_at,omitempty"`
	RekeyedAt    *time.Time `json:"rekeyed_at,omitempty"`
	ShreddedAt   *time.Time `json:"shredded_at,omitempty"`
	ErasedAt     *time.Time `json:"erased_at,omitempty"`
	// CommitmentSalt (hex) is in the answer of a forget call (the first or a repeated one) and
	// the forget, only: with the subject id it checks the attestation's
	// subject commitment. shredd does not keep it.
	CommitmentSalt string             `json:"commitment_salt,omitempty"`
	Epoch          int64              `json:"epoch,omitempty"`
	Conditions     []shredd.Condition `json:"conditions"`
	Verification   []shredd.Condition `json:"verification"`
}

func tptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func forgetJSON(f shredd.Forget) forgetResponse {
	return forgetResponse{Forget: f.ID.String(), State: f.State, Overdue: f.Overdue, Barrier: f.Barrier,
		TPropSeconds: f.TProp.Seconds(), Deadline: f.Deadline, RequestedAt: f.RequestedAt,
		CommittedAt: tptr(f.CommittedAt), RekeyedAt: tptr(f.RekeyedAt), ShreddedAt: tptr(f.ShreddedAt), ErasedAt: tptr(f.ErasedAt),
		Epoch: f.Epoch, Conditions: f.Conditions, Verification: f.Verification, CommitmentSalt: hex.EncodeToString(f.Salt)}
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request) {
	var req forgetRequest
	if err := s.decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Subject == "" {
		s.fail(w, r, badRequest("missing_field", "subject is required"))
		return
	}
	if req.DryRun {
		p, err := s.svc.Preview(r.Context(), req.Subject)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, previewJSON(p))
		return
	}
	f, err := s.svc.Forget(r.Context(), req.Subject)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, forgetJSON(f))
}

// verifyForget evaluates a forget's conditions now (POST
// /v1/forgets/{id}/verify) and answers it, erased when they all hold.
func (s *Server) verifyForget(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := s.svc.Verify(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, forgetJSON(f))
}

// attestation answers the signed erasure attestation of an erased forget
// (a DSSE envelope, docs/attestation.md); 409 not_erased before.
func (s *Server) attestation(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.attKey == nil {
		s.fail(w, r, &problemError{status: http.StatusServiceUnavailable, code: "backend_unavailable", title: "No attestation key is configured"})
		return
	}
	att, err := s.svc.Attestation(r.Context(), id, s.attKey)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The exact bytes signed at erasure: their SHA-256 is in the log.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(att)
}

func (s *Server) getForget(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := s.svc.GetForget(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, forgetJSON(f))
}

type epochResponse struct {
	Epoch       int64     `json:"epoch"`
	RootVersion int       `json:"root_version"`
	Retired     []int     `json:"retired_versions"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

func (s *Server) epoch(w http.ResponseWriter, r *http.Request) {
	e, err := s.svc.RunEpoch(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ret := e.Retired
	if ret == nil {
		ret = []int{}
	}
	writeJSON(w, http.StatusOK, epochResponse{Epoch: e.ID, RootVersion: e.ToVersion, Retired: ret, StartedAt: e.StartedAt.UTC(), FinishedAt: e.FinishedAt.UTC()})
}
