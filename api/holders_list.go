package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/shredd/shredd"
)

// holderListResponse is the answer of GET /v1/holders: one page of holders
// and the cursor of the next one (absent on the last page).
type holderListResponse struct {
	Holders []holderStatusJSON `json:"holders"`
	Next    string             `json:"next,omitempty"`
}

type holderStatusJSON struct {
	Holder           string         `json:"holder"`
	CreatedAt        time.Time      `json:"created_at"`
	PendingArtifacts int            `json:"pending_artifacts"`
	PendingForgets   int            `json:"pending_forgets"`
	LastAckAt        *time.Time     `json:"last_ack_at"`
	Inventory        *inventoryJSON `json:"inventory"`
}

type inventoryJSON struct {
	ReportedAt       time.Time `json:"reported_at"`
	Items            int       `json:"items"`
	UnknownArtifacts int       `json:"unknown_artifacts"`
	UnknownKinds     int       `json:"unknown_kinds"`
	Clean            bool      `json:"clean"`
}

// listHolders serves GET /v1/holders?limit=N&cursor=C: a page of the
// registered holders by id, with their pending purge work, last ack and
// latest inventory (docs/api.md). A holder-bound token sees its own holder
// only.
func (hh *holderHandlers) listHolders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var hq shredd.HolderQuery
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > shredd.MaxHolderPage || strconv.Itoa(n) != v {
			hh.fail(w, r, badRequest("invalid_request", "limit must be a decimal from 1 to "+strconv.Itoa(shredd.MaxHolderPage)))
			return
		}
		hq.Limit = n
	}
	if hq.Cursor = q.Get("cursor"); hq.Cursor != "" {
		if _, err := shredd.ParseHolderCursor(hq.Cursor); err != nil {
			hh.fail(w, r, badRequest("invalid_request", "cursor must be the next of an earlier page of this listing"))
			return
		}
	}
	// An unbound token names no holder and lists them all; a bound one
	// acts as its holder only.
	only, err := actAs(r.Context(), "")
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	hq.Only = only
	page, err := hh.svc.ListHolders(r.Context(), hq)
	if err != nil {
		hh.fail(w, r, err)
		return
	}
	out := holderListResponse{Holders: make([]holderStatusJSON, len(page.Holders)), Next: page.Next}
	for i, h := range page.Holders {
		j := holderStatusJSON{Holder: h.ID, CreatedAt: h.CreatedAt, PendingArtifacts: h.PendingArtifacts, PendingForgets: h.PendingForgets}
		if !h.LastAck.IsZero() {
			t := h.LastAck
			j.LastAckAt = &t
		}
		if inv := h.Inventory; inv != nil {
			j.Inventory = &inventoryJSON{ReportedAt: inv.ReportedAt, Items: inv.Items, UnknownArtifacts: inv.UnknownArtifacts,
				UnknownKinds: inv.UnknownKinds, Clean: inv.Clean()}
		}
		out.Holders[i] = j
	}
	writeJSON(w, http.StatusOK, out)
}
