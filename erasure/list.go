package erasure

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// reportedState returns the SQL of the state a forget reports (view):
// erased once erased; blocked when not erased, committed, a holder's
// inventory breaks the closure (?1, from closureBreaks) and every artifact
// of the lineage has a registered kind (else closure_intact is pending,
// not failed: the n forgets whose lineage holds one are the ids ?first to
// ?first+n-1, unregisteredKinds); overdue past the deadline (?2, now); else
// the pipeline state. It must stay the SQL twin of view's switch:
// TestListForgetsStates checks them against each other.
func reportedState(first, n int) string {
	blocked := `?1 AND committed_at IS NOT NULL`
	if n > 0 {
		in := make([]string, n)
		for i := range in {
			in[i] = "?" + strconv.Itoa(first+i)
		}
		blocked += ` AND id NOT IN (` + strings.Join(in, ", ") + `)`
	}
	return `CASE
	WHEN erased_at IS NOT NULL THEN 'erased'
	WHEN ` + blocked + ` THEN 'blocked'
	WHEN deadline < ?2 THEN 'overdue'
	ELSE state END`
}

// unregisteredKinds returns, when the closure is broken (blocked), the ids
// of the open forgets (committed, not erased) whose settled lineage holds
// an artifact of an unregistered kind (registry.Unregistered): those
// reportedState does not call blocked.
func (c *core) unregisteredKinds(ctx context.Context, blocked bool) ([]any, error) {
	if !blocked {
		return nil, nil
	}
	open, err := c.queryForgets(ctx, ` WHERE committed_at IS NOT NULL AND erased_at IS NULL`)
	if err != nil {
		return nil, err
	}
	sids := make([]envelope.SID, len(open))
	for i, r := range open {
		sids[i] = r.sid
	}
	unreg, err := c.reg.Unregistered(ctx, sids)
	if err != nil {
		return nil, fmt.Errorf("erasure: list forgets: %w", err)
	}
	var ids []any
	for _, r := range open {
		if unreg[r.sid] {
			ids = append(ids, r.id[:])
		}
	}
	return ids, nil
}

// ListForgets answers one page of forgets, newest first (request time,
// then id, both descending), of the reported state q.State when it is
// not "", after q.Cursor, with the counts of every state. The filter, the
// order and the page bound run in SQL (keyset pagination: a page costs
// its own rows, not those before it); only the forgets of the page are
// evaluated in full. A malformed cursor, limit or state is ErrInvalid.
func (s *Eraser) ListForgets(ctx context.Context, q shredd.ForgetQuery) (shredd.ForgetPage, error) {
	if err := s.reg.Settle(ctx); err != nil { // the states read the lineage by subject
		return shredd.ForgetPage{}, fmt.Errorf("erasure: list forgets: %w", err)
	}
	switch q.State {
	case "", shredd.StateRequested, shredd.StateCommitted, shredd.StateShredded, shredd.StateErased, shredd.StateBlocked, shredd.StateOverdue:
	default:
		return shredd.ForgetPage{}, fmt.Errorf("erasure: list forgets: unknown state: %w", shredd.ErrInvalid)
	}
	if q.Limit < 0 || q.Limit > shredd.MaxForgetPage {
		return shredd.ForgetPage{}, fmt.Errorf("erasure: list forgets: limit over %d: %w", shredd.MaxForgetPage, shredd.ErrInvalid)
	}
	limit := q.Limit
	if limit == 0 {
		limit = shredd.MaxForgetPage
	}
	breaks, err := s.closureBreaks(ctx)
	if err != nil {
		return shredd.ForgetPage{}, err
	}
	blocked, now := len(breaks) > 0, s.opts.Now().UnixNano()
	unreg, err := s.unregisteredKinds(ctx, blocked)
	if err != nil {
		return shredd.ForgetPage{}, err
	}
	// Five parameters, then unreg: ?3 the state (NULL: any), ?4 and ?5 the
	// cursor's request time and id (NULL: the first page).
	args := []any{blocked, now, nil, nil, nil}
	if q.State != "" {
		args[2] = q.State
	}
	if q.Cursor != "" {
		c, err := shredd.ParseForgetCursor(q.Cursor)
		if err != nil {
			return shredd.ForgetPage{}, fmt.Errorf("erasure: list forgets: %w", err)
		}
		args[3], args[4] = c.RequestedAt.UnixNano(), c.ID[:]
	}
	// The casts type the parameters where a NULL alone says nothing
	// (PostgreSQL must know a parameter's type).
	where := ` WHERE (CAST(?3 AS TEXT) IS NULL OR ` + reportedState(6, len(unreg)) + ` = ?3)
		AND (CAST(?4 AS BIGINT) IS NULL OR requested_at < ?4 OR (requested_at = ?4 AND id < ?5))`
	// One row more than the page says whether there is a next one.
	rs, err := s.queryForgets(ctx, where+fmt.Sprintf(` ORDER BY requested_at DESC, id DESC LIMIT %d`, limit+1), append(args, unreg...)...)
	if err != nil {
		return shredd.ForgetPage{}, err
	}
	page := shredd.ForgetPage{Forgets: []shredd.Forget{}}
	if len(rs) > limit {
		rs = rs[:limit]
		last := rs[len(rs)-1]
		var id shredd.ID
		copy(id[:], last.id[:])
		page.Next = shredd.ForgetCursor{RequestedAt: ts0(last.requested), ID: id}.String()
	}
	var rr rootRead // the root store asked once for the page
	for _, r := range rs {
		f, err := s.view(ctx, r, &rr)
		if err != nil {
			return shredd.ForgetPage{}, err
		}
		page.Forgets = append(page.Forgets, f)
	}
	if page.Counts, err = s.countStates(ctx, blocked, now, unreg); err != nil {
		return shredd.ForgetPage{}, err
	}
	return page, nil
}

// countStates counts the forgets by reported state (every state present);
// unreg are the forgets reportedState does not call blocked.
func (s *Eraser) countStates(ctx context.Context, blocked bool, now int64, unreg []any) (map[string]int, error) {
	counts := map[string]int{shredd.StateRequested: 0, shredd.StateCommitted: 0, shredd.StateShredded: 0,
		shredd.StateErased: 0, shredd.StateBlocked: 0, shredd.StateOverdue: 0}
	rows, err := s.db.QueryContext(ctx, `SELECT `+reportedState(3, len(unreg))+`, count(*) FROM forgets GROUP BY 1`, append([]any{blocked, now}, unreg...)...)
	if err != nil {
		return nil, fmt.Errorf("erasure: count forgets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("erasure: count forgets: %w", err)
		}
		counts[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: count forgets: %w", err)
	}
	return counts, nil
}

func ts0(ns int64) time.Time { return time.Unix(0, ns).UTC() }
