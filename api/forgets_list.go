package api

import (
	"net/http"
	"strconv"

	"github.com/shredd/shredd"
)

// forgetListResponse is the answer of GET /v1/forgets: one page, the cursor
// of the next one (absent on the last page) and the counts of every state
// over all forgets.
type forgetListResponse struct {
	Forgets []forgetResponse `json:"forgets"`
	Next    string           `json:"next,omitempty"`
	Counts  map[string]int   `json:"counts"`
}

// listForgets serves GET /v1/forgets?state=S&limit=N&cursor=C: a page of
// forgets, newest first (docs/api.md).
func (fh *forgetHandlers) listForgets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var fq shredd.ForgetQuery
	switch fq.State = q.Get("state"); fq.State {
	case "", shredd.StateRequested, shredd.StateCommitted, shredd.StateShredded, shredd.StateErased,
		shredd.StateBlocked, shredd.StateOverdue:
	default:
		fh.fail(w, r, badRequest("invalid_state", "state must be requested, committed, shredded, erased, blocked or overdue"))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > shredd.MaxForgetPage || strconv.Itoa(n) != v {
			fh.fail(w, r, badRequest("invalid_request", "limit must be a decimal from 1 to "+strconv.Itoa(shredd.MaxForgetPage)))
			return
		}
		fq.Limit = n
	}
	if fq.Cursor = q.Get("cursor"); fq.Cursor != "" {
		if _, err := shredd.ParseForgetCursor(fq.Cursor); err != nil {
			fh.fail(w, r, badRequest("invalid_request", "cursor must be the next of an earlier page of this listing"))
			return
		}
	}
	page, err := fh.svc.ListForgets(r.Context(), fq)
	if err != nil {
		fh.fail(w, r, err)
		return
	}
	out := forgetListResponse{Forgets: make([]forgetResponse, len(page.Forgets)), Next: page.Next, Counts: page.Counts}
	for i, f := range page.Forgets {
		out.Forgets[i] = forgetJSON(f)
	}
	writeJSON(w, http.StatusOK, out)
}
