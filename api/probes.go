package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd"
)

// The probe routes (docs/api.md "Probes"): a holder declares that it
// answers probes, fetches the ones open to it, and answers each, signed.

type probeDeclaration struct {
	CompactInterval string `json:"compact_interval"` // a Go duration, 1s to 720h
}

// declareProbes records that a holder answers probes (PUT
// /v1/holders/{id}/probe) or withdraws it (DELETE).
//
// A declaration changes how the holder's forgets close, and carries no
// signature, so it takes the holder's own token (bound to it) or an
// admin's: an unbound register token (the one that registers artifacts)
// may not withdraw or stretch another holder's probes.
func (hh *holderHandlers) declareProbes(w http.ResponseWriter, r *http.Request) {
	holder, err := holderParam(r)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	if t := tokenOf(r.Context()); t == nil || (t.Holder == "" && !t.Has(shredd.ScopeAdmin)) {
		hh.fail(w, r, &problemError{status: http.StatusForbidden, code: "forbidden", title: "The token may not declare this holder's probes",
			detail: "declaring or withdrawing a holder's probes takes a token bound to that holder, or the admin scope"})
		return
	}
	var compact time.Duration
	if r.Method == http.MethodPut {
		var req probeDeclaration
		if err := hh.decode(r, &req); err != nil {
			hh.fail(w, r, err)
			return
		}
		if compact, err = time.ParseDuration(req.CompactInterval); err != nil || compact <= 0 {
			hh.fail(w, r, badRequest("invalid_request", "compact_interval: want a duration such as \"10m\", from 1s to 720h"))
			return
		}
	}
	if err := hh.svc.DeclareProbes(r.Context(), holder, compact); err != nil {
		hh.fail(w, r, err)
		return
	}
	if compact == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"holder": holder, "compact_interval": nil})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"holder": holder, "compact_interval": compact.String()})
}

type probeJSON struct {
	Probe     string    `json:"probe"`
	Forget    string    `json:"forget"`
	Nonce     string    `json:"nonce"`
	Artifacts []string  `json:"artifacts"`
	Markers   []string  `json:"markers"`
	Deadline  time.Time `json:"deadline"`
}

// probes lists the probes a holder must answer now (GET
// /v1/holders/{id}/probes).
func (hh *holderHandlers) probes(w http.ResponseWriter, r *http.Request) {
	holder, err := holderParam(r)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	ps, err := hh.svc.Probes(r.Context(), holder)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	out := make([]probeJSON, len(ps))
	for i, p := range ps {
		markers := p.Markers
		if markers == nil {
			markers = []string{}
		}
		out[i] = probeJSON{Probe: p.ID.String(), Forget: p.Forget.String(), Nonce: p.Nonce, Artifacts: idStrings(p.Artifacts), Markers: markers, Deadline: p.Deadline}
	}
	writeJSON(w, http.StatusOK, map[string]any{"probes": out})
}

type probeAnswer struct {
	Found     []string `json:"found"`
	Signature string   `json:"signature"` // base64 Ed25519 over attest.ProbeMessage
}

// answerProbe takes a holder's signed answer to a probe (POST
// /v1/holders/{id}/probes/{probe}).
func (hh *holderHandlers) answerProbe(w http.ResponseWriter, r *http.Request) {
	holder, err := holderParam(r)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	id, err := shredd.ParseID(chi.URLParam(r, "probe"))
	if err != nil {
		hh.fail(w, r, badRequest("invalid_id", "probe ids are 32 hex digits"))
		return
	}
	var req probeAnswer
	if err := hh.decode(r, &req); err != nil {
		hh.fail(w, r, err)
		return
	}
	if req.Found == nil || req.Signature == "" {
		hh.fail(w, r, badRequest("missing_field", "found (a list, [] for nothing) and signature are required"))
		return
	}
	sig, err := b64("signature", req.Signature)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	res, err := hh.svc.AnswerProbe(r.Context(), holder, id, req.Found, sig)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"probe": res.Probe.String(), "clean": res.Clean})
}
