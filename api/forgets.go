package api

import (
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/shredd/shredd"
)

// forgetHandlers serve the forget routes: the forget itself (and its dry
// run), its listing, verification and attestation, and root epochs.
type forgetHandlers struct {
	*codec
	svc      shredd.Eraser
	evidence shredd.Evidence   // the attestation
	lives    shredd.Reinstater // reinstatement
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
	Reads            previewReads      `json:"reads"`
}

// previewReads is what shredd observed of the reads of the lineage
// (shredd.PreviewReads).
type previewReads struct {
	Leases               int      `json:"leases"`
	Named                int      `json:"named"`
	Inherited            int      `json:"inherited"`
	Independent          int      `json:"independent"`
	Refused              int      `json:"refused"`
	IndependentArtifacts []string `json:"independent_artifacts"`
	Separate             int      `json:"separate"`
	SeparateArtifacts    []string `json:"separate_artifacts"`
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
		Artifacts: make([]previewArtifact, len(p.Artifacts)),
		Reads: previewReads{Leases: p.Reads.Leases, Named: p.Reads.Named, Inherited: p.Reads.Inherited, Independent: p.Reads.Independent,
			Refused: p.Reads.Refused, IndependentArtifacts: idStrings(p.Reads.IndependentArtifacts),
			Separate: p.Reads.Separate, SeparateArtifacts: idStrings(p.Reads.SeparateArtifacts)}}
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

func forgetJSON(f shredd.Forget) forgetResponse {
	return forgetResponse{Forget: f.ID.String(), State: f.State, Overdue: f.Overdue, Barrier: f.Barrier,
		TPropSeconds: f.TProp.Seconds(), Deadline: f.Deadline, RequestedAt: f.RequestedAt,
		CommittedAt: tptr(f.CommittedAt), RekeyedAt: tptr(f.RekeyedAt), ShreddedAt: tptr(f.ShreddedAt), ErasedAt: tptr(f.ErasedAt),
		Epoch: f.Epoch, Conditions: f.Conditions, Verification: f.Verification, CommitmentSalt: hex.EncodeToString(f.Salt)}
}

func (fh *forgetHandlers) forget(w http.ResponseWriter, r *http.Request) {
	var req forgetRequest
	if err := fh.decode(r, &req); err != nil {
		fh.fail(w, r, err)
		return
	}
	if req.Subject == "" {
		fh.fail(w, r, badRequest("missing_field", "subject is required"))
		return
	}
	if req.DryRun {
		p, err := fh.svc.Preview(r.Context(), req.Subject)
		if err != nil {
			fh.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, previewJSON(p))
		return
	}
	f, err := fh.svc.Forget(r.Context(), req.Subject)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, forgetJSON(f))
}

// verifyForget evaluates a forget's conditions now (POST
// /v1/forgets/{id}/verify) and answers it, erased when they all hold.
func (fh *forgetHandlers) verifyForget(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	f, err := fh.svc.Verify(r.Context(), id)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, forgetJSON(f))
}

// attestation answers the signed erasure attestation of an erased forget
// (a DSSE envelope, docs/attestation.md); 409 not_erased before.
func (fh *forgetHandlers) attestation(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	att, err := fh.evidence.Attestation(r.Context(), id)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	// The exact bytes signed at erasure: their SHA-256 is in the log.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(att)
}

func (fh *forgetHandlers) getForget(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "forget")
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	f, err := fh.svc.GetForget(r.Context(), id)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, forgetJSON(f))
}

// reinstateRequest is the body of POST /v1/subjects/reinstate: the
// subject id in the body, never in the URL.
type reinstateRequest struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

// reinstateResponse is a reinstatement (shredd.Reinstatement): no subject id.
type reinstateResponse struct {
	Generation         uint32    `json:"generation"`
	PreviousGeneration uint32    `json:"previous_generation"`
	Forget             string    `json:"forget"`
	LogIndex           int64     `json:"log_index"`
	ReinstatedAt       time.Time `json:"reinstated_at"`
}

// reinstate gives a forgotten subject a new key generation (POST
// /v1/subjects/reinstate, admin): 409 not_forgotten for a subject without
// a committed forget to follow, 409 not_erased while that forget is not
// erased. The log line names the generations and the forget, never the
// subject.
func (fh *forgetHandlers) reinstate(w http.ResponseWriter, r *http.Request) {
	var req reinstateRequest
	if err := fh.decode(r, &req); err != nil {
		fh.fail(w, r, err)
		return
	}
	if req.Subject == "" {
		fh.fail(w, r, badRequest("missing_field", "subject is required"))
		return
	}
	rs, err := fh.lives.Reinstate(r.Context(), req.Subject, req.Reason)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	fh.log.LogAttrs(r.Context(), slog.LevelInfo, "subject reinstated", slog.String("request_id", requestID(r.Context())),
		slog.String("forget", rs.Forget.String()), slog.Uint64("generation", uint64(rs.Generation)),
		slog.Uint64("previous_generation", uint64(rs.PreviousGeneration)), slog.Int64("log_index", rs.LogIndex))
	writeJSON(w, http.StatusOK, reinstateResponse{Generation: rs.Generation, PreviousGeneration: rs.PreviousGeneration,
		Forget: rs.Forget.String(), LogIndex: rs.LogIndex, ReinstatedAt: rs.ReinstatedAt})
}

type epochResponse struct {
	Epoch       int64     `json:"epoch"`
	RootVersion int       `json:"root_version"`
	Retired     []int     `json:"retired_versions"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

func (fh *forgetHandlers) epoch(w http.ResponseWriter, r *http.Request) {
	e, err := fh.svc.RunEpoch(r.Context())
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	ret := e.Retired
	if ret == nil {
		ret = []int{}
	}
	writeJSON(w, http.StatusOK, epochResponse{Epoch: e.ID, RootVersion: e.ToVersion, Retired: ret, StartedAt: e.StartedAt.UTC(), FinishedAt: e.FinishedAt.UTC()})
}
