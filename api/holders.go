package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd"
)

// holderHandlers serve the holders' routes: registration, listing, purge
// work, acks and inventories.
type holderHandlers struct {
	*codec
	svc shredd.Holders
}

type holderRequest struct {
	Holder    string `json:"holder"`
	PublicKey string `json:"public_key"` // base64 of the 32-byte Ed25519 public key
}

type holderResponse struct {
	Holder    string    `json:"holder"`
	PublicKey string    `json:"public_key"`
	CreatedAt time.Time `json:"created_at"`
}

// registerHolder registers a holder and its Ed25519 key (POST /v1/holders).
func (hh *holderHandlers) registerHolder(w http.ResponseWriter, r *http.Request) {
	var req holderRequest
	if err := hh.decode(r, &req); err != nil {
		hh.fail(w, r, err)
		return
	}
	if req.Holder == "" || req.PublicKey == "" {
		hh.fail(w, r, badRequest("missing_field", "holder and public_key are required"))
		return
	}
	pub, err := b64("public_key", req.PublicKey)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	h, created, err := hh.svc.RegisterHolder(r.Context(), req.Holder, pub)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, holderResponse{Holder: h.ID, PublicKey: base64.StdEncoding.EncodeToString(h.PublicKey), CreatedAt: h.CreatedAt})
}

// holderParam returns the {id} holder of the path, refusing a holder-bound
// token of another holder.
func holderParam(r *http.Request) (string, error) {
	id, err := pathSegment(r, "id")
	if err != nil || !shredd.ValidHolder(id) {
		return "", badRequest("invalid_id", "holder ids are 1 to 128 of [A-Za-z0-9._:@-]")
	}
	return actAs(r.Context(), id)
}

// pathSegment returns the {name} segment of the path, percent-decoded
// exactly once. chi routes on r.URL.RawPath when it is set, that is when
// the client escaped a character Go would not (a holder id's ':' or '@',
// which JavaScript's encodeURIComponent and Python's quote(safe="")
// escape), and then its parameter is still escaped; otherwise it routes on
// the decoded r.URL.Path. Decoding only in the first case decodes once:
// "ops%40eu%3A1" names "ops@eu:1", and "ops%2540eu" stays "ops%40eu".
func pathSegment(r *http.Request, name string) (string, error) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	return url.PathUnescape(v)
}

type purgeJSON struct {
	Forget    string   `json:"forget"`
	Artifacts []string `json:"artifacts"`
}

// purges lists a holder's purge work (GET /v1/holders/{id}/purges).
func (hh *holderHandlers) purges(w http.ResponseWriter, r *http.Request) {
	holder, err := holderParam(r)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	ps, err := hh.svc.Purges(r.Context(), holder)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	out := make([]purgeJSON, len(ps))
	for i, p := range ps {
		out[i] = purgeJSON{Forget: p.Forget.String(), Artifacts: idStrings(p.Artifacts)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"purges": out})
}

func idStrings(ids []shredd.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

type ackRequest struct {
	Holder    string   `json:"holder"`
	Artifacts []string `json:"artifacts"`
	Signature string   `json:"signature"` // base64 Ed25519 signature over the ack payload
}

// ack takes a holder's signed purge ack (POST /v1/forgets/{id}/acks).
func (hh *holderHandlers) ack(w http.ResponseWriter, r *http.Request) {
	fid, err := pathID(r, "forget")
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	var req ackRequest
	if err := hh.decode(r, &req); err != nil {
		hh.fail(w, r, err)
		return
	}
	holder, err := actAs(r.Context(), req.Holder)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	if holder == "" || len(req.Artifacts) == 0 || req.Signature == "" {
		hh.fail(w, r, badRequest("missing_field", "holder, artifacts and signature are required"))
		return
	}
	ids, err := parseIDs("artifacts", req.Artifacts)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	sig, err := b64("signature", req.Signature)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	res, err := hh.svc.Ack(r.Context(), fid, holder, ids, sig)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"closed": idStrings(res.Closed), "missing": idStrings(res.Missing)})
}

type inventoryRequest struct {
	Artifacts []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	} `json:"artifacts"`
}

// inventory takes a holder's inventory (POST /v1/holders/{id}/inventory).
func (hh *holderHandlers) inventory(w http.ResponseWriter, r *http.Request) {
	holder, err := holderParam(r)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	var req inventoryRequest
	if err := hh.decode(r, &req); err != nil {
		hh.fail(w, r, err)
		return
	}
	items := make([]shredd.InventoryItem, len(req.Artifacts))
	for i, a := range req.Artifacts {
		items[i] = shredd.InventoryItem{ID: a.ID, Kind: a.Kind}
	}
	inv, err := hh.svc.ReportInventory(r.Context(), holder, items)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	orEmpty := func(ss []string) []string {
		if ss == nil {
			return []string{}
		}
		return ss
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": inv.Items, "unknown_artifacts": orEmpty(inv.UnknownArtifact),
		"unknown_kinds": orEmpty(inv.UnknownKind), "contradicted_acks": orEmpty(inv.ContradictedAcks)})
}
