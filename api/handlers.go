package api

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd/derivation"
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
	Kind     string   `json:"kind"`
	Holder   string   `json:"holder,omitempty"`
}

func (b sourceBody) source() (derivation.Source, error) {
	src := derivation.Source{Kind: b.Kind, Holder: b.Holder, Subjects: b.Subjects}
	if b.Subject != "" {
		src.Subjects = append([]string{b.Subject}, b.Subjects...)
	}
	ps, err := parseIDs("parents", b.Parents)
	if err != nil {
		return src, err
	}
	src.Parents = ps
	if b.Kind == "" {
		return src, badRequest("missing_field", "kind is required")
	}
	return src, nil
}

type encryptRequest struct {
	sourceBody
	Plaintext string `json:"plaintext"`
	Context   string `json:"context,omitempty"`
}

type encryptResponse struct {
	Artifact    string `json:"artifact"`
	Ciphertext  string `json:"ciphertext"`
	LineageSize int    `json:"lineage_size"`
}

func (s *Server) encrypt(w http.ResponseWriter, r *http.Request) {
	var req encryptRequest
	if err := s.decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	src, err := req.source()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pt, err := b64("plaintext", req.Plaintext)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, err := b64("context", req.Context)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.Encrypt(r.Context(), src, pt, ctx)
	clear(pt)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, encryptResponse{Artifact: out.Artifact.String(), Ciphertext: out.Ciphertext, LineageSize: out.Lineage})
}

type decryptRequest struct {
	Ciphertext string `json:"ciphertext"`
	Context    string `json:"context,omitempty"`
}

type decryptResponse struct {
	Plaintext string `json:"plaintext"`
	Artifact  string `json:"artifact"`
	Kind      string `json:"kind"`
}

func (s *Server) decrypt(w http.ResponseWriter, r *http.Request) {
	var req decryptRequest
	if err := s.decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Ciphertext == "" {
		s.fail(w, r, badRequest("missing_field", "ciphertext is required"))
		return
	}
	ctx, err := b64("context", req.Context)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.Decrypt(r.Context(), req.Ciphertext, ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := decryptResponse{Plaintext: base64.StdEncoding.EncodeToString(out.Plaintext), Artifact: out.Artifact.String(), Kind: out.Kind}
	clear(out.Plaintext)
	writeJSON(w, http.StatusOK, resp)
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

func artifactJSON(a derivation.Artifact) artifactResponse {
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
	src, err := req.source()
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
	id, err := derivation.ParseID(chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, badRequest("invalid_id", "artifact ids are 32 hex digits"))
		return
	}
	a, err := s.svc.GetArtifact(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, artifactJSON(a))
}

type forgetRequest struct {
	Subject string `json:"subject"`
}

// forgetResponse is the pending-erasure token.
type forgetResponse struct {
	Forget       string                 `json:"forget"`
	State        string                 `json:"state"`
	Overdue      bool                   `json:"overdue"`
	Barrier      int64                  `json:"barrier"`
	TPropSeconds float64                `json:"t_prop_seconds"`
	Deadline     time.Time              `json:"deadline"`
	RequestedAt  time.Time              `json:"requested_at"`
	CommittedAt  *time.Time             `json:"committed_at,omitempty"`
	RekeyedAt    *time.Time             `json:"rekeyed_at,omitempty"`
	ShreddedAt   *time.Time             `json:"shredded_at,omitempty"`
	Epoch        int64                  `json:"epoch,omitempty"`
	Conditions   []derivation.Condition `json:"conditions"`
}

func tptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func forgetJSON(f derivation.Forget) forgetResponse {
	return forgetResponse{Forget: f.ID.String(), State: f.State, Overdue: f.Overdue, Barrier: f.Barrier,
		TPropSeconds: f.TProp.Seconds(), Deadline: f.Deadline, RequestedAt: f.RequestedAt,
		CommittedAt: tptr(f.CommittedAt), RekeyedAt: tptr(f.RekeyedAt), ShreddedAt: tptr(f.ShreddedAt),
		Epoch: f.Epoch, Conditions: f.Conditions}
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
	f, err := s.svc.Forget(r.Context(), req.Subject)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, forgetJSON(f))
}

func (s *Server) getForget(w http.ResponseWriter, r *http.Request) {
	id, err := derivation.ParseID(chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, badRequest("invalid_id", "forget ids are 32 hex digits"))
		return
	}
	f, err := s.svc.GetForget(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, forgetJSON(f))
}

func (s *Server) listForgets(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	switch state {
	case "", derivation.StateRequested, derivation.StateCommitted, derivation.StateShredded:
	default:
		s.fail(w, r, badRequest("invalid_state", "state must be requested, committed or shredded"))
		return
	}
	fs, err := s.svc.Forgets(r.Context(), state, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]forgetResponse, len(fs))
	for i, f := range fs {
		out[i] = forgetJSON(f)
	}
	writeJSON(w, http.StatusOK, map[string]any{"forgets": out})
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
