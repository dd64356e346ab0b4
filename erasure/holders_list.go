package erasure

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// ListHolders answers one page of registered holders, by id ascending,
// after q.Cursor (keyset pagination), each with its pending purge work,
// the time of its latest signed ack and its latest inventory report. A
// fixed number of queries whatever the page size: the page (with the
// inventories), then the pending work (pendingWork) and the latest acks of
// the page's id range. The pending work is Purges' count for the page's
// holders at once: per open forget (committed, not erased), the holder's
// plaintext-held artifacts of the subject's lineage that no ack of that
// forget covers.
// TestListHoldersAgreesWithPurges checks the two against each other.
// A malformed cursor or limit is ErrInvalid.
func (s *Holders) ListHolders(ctx context.Context, q shredd.HolderQuery) (shredd.HolderPage, error) {
	if err := s.reg.Settle(ctx); err != nil { // the purge work reads the lineage by subject
		return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: %w", err)
	}
	if q.Limit < 0 || q.Limit > shredd.MaxHolderPage {
		return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: limit over %d: %w", shredd.MaxHolderPage, shredd.ErrInvalid)
	}
	if q.Only != "" && !shredd.ValidHolder(q.Only) {
		return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: holder id: %w", shredd.ErrInvalid)
	}
	limit := q.Limit
	if limit == 0 {
		limit = shredd.MaxHolderPage
	}
	// Always two parameters: ?1 the cursor's holder, ?2 the only holder
	// (NULL: none). The casts type them where a NULL alone says nothing
	// (PostgreSQL must know a parameter's type).
	args := []any{nil, nil}
	if q.Cursor != "" {
		after, err := shredd.ParseHolderCursor(q.Cursor)
		if err != nil {
			return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: %w", err)
		}
		args[0] = after
	}
	if q.Only != "" {
		args[1] = q.Only
	}
	// One row more than the page says whether there is a next one. Ids
	// compare in the database's collation both in the filter and in the
	// order, so the pages follow each other whatever it is.
	rows, err := s.db.QueryContext(ctx, `SELECT h.id, h.created_at, i.reported_at, i.items, i.unknown_artifacts, i.unknown_kinds
		FROM holders h LEFT JOIN inventories i ON i.holder = h.id
		WHERE (CAST(?1 AS TEXT) IS NULL OR h.id > ?1) AND (CAST(?2 AS TEXT) IS NULL OR h.id = ?2)
		ORDER BY h.id LIMIT `+fmt.Sprint(limit+1), args...)
	if err != nil {
		return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: %w", err)
	}
	page := shredd.HolderPage{Holders: []shredd.HolderStatus{}}
	for rows.Next() {
		var h shredd.HolderStatus
		var created int64
		var reported, items, unknownArts, unknownKinds sql.NullInt64
		if err := rows.Scan(&h.ID, &created, &reported, &items, &unknownArts, &unknownKinds); err != nil {
			rows.Close()
			return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: %w", err)
		}
		h.CreatedAt = ts0(created)
		if reported.Valid {
			h.Inventory = &shredd.InventoryStatus{ReportedAt: ts0(reported.Int64), Items: int(items.Int64),
				UnknownArtifacts: int(unknownArts.Int64), UnknownKinds: int(unknownKinds.Int64)}
		}
		page.Holders = append(page.Holders, h)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return shredd.HolderPage{}, fmt.Errorf("erasure: list holders: %w", err)
	}
	rows.Close()
	if len(page.Holders) > limit {
		page.Holders = page.Holders[:limit]
		page.Next = shredd.HolderCursor(page.Holders[limit-1].ID)
	}
	if len(page.Holders) == 0 {
		return page, nil
	}
	first, last := page.Holders[0].ID, page.Holders[len(page.Holders)-1].ID
	at := make(map[string]*shredd.HolderStatus, len(page.Holders))
	for i := range page.Holders {
		at[page.Holders[i].ID] = &page.Holders[i]
	}
	if err := s.pendingWork(ctx, first, last, at); err != nil {
		return shredd.HolderPage{}, err
	}
	err = s.eachHolderRow(ctx, `SELECT holder, max(received_at), 0 FROM holder_acks WHERE holder >= ? AND holder <= ? GROUP BY holder`,
		first, last, func(h *shredd.HolderStatus, received, _ int64) { h.LastAck = ts0(received) }, at)
	if err != nil {
		return shredd.HolderPage{}, err
	}
	return page, nil
}

// pendingWork sets the pending purge work of the page's holders (at, from
// first to last): per open forget (committed, not erased), the holder's
// plaintext-held artifacts of the subject's settled lineage
// (registry.HeldIn) that no ack of that forget covers. Three statements
// whatever the page and the number of open forgets (the lineages a
// statement per 256 subjects): the open forgets, their acks, the held
// artifacts.
func (s *Holders) pendingWork(ctx context.Context, first, last string, at map[string]*shredd.HolderStatus) error {
	open, err := s.queryForgets(ctx, ` WHERE committed_at IS NOT NULL AND erased_at IS NULL`)
	if err != nil || len(open) == 0 {
		return err
	}
	acked, err := s.openAcks(ctx)
	if err != nil {
		return err
	}
	bySID := make(map[envelope.SID][]shredd.ID, len(open))
	sids := make([]envelope.SID, 0, len(open))
	for _, r := range open {
		if bySID[r.sid] == nil {
			sids = append(sids, r.sid)
		}
		bySID[r.sid] = append(bySID[r.sid], r.id)
	}
	held, err := s.reg.HeldIn(ctx, sids, first, last)
	if err != nil {
		return fmt.Errorf("erasure: list holders: %w", err)
	}
	forgets := map[string]map[shredd.ID]bool{} // the open forgets of each holder's pending work
	for _, a := range held {
		h := at[a.Holder]
		if h == nil {
			continue // not on the page
		}
		for _, f := range bySID[a.SID] {
			if acked[[2]shredd.ID{f, a.ID}] {
				continue
			}
			h.PendingArtifacts++
			if forgets[a.Holder] == nil {
				forgets[a.Holder] = map[shredd.ID]bool{}
			}
			forgets[a.Holder][f] = true
		}
	}
	for holder, fs := range forgets {
		at[holder].PendingForgets = len(fs)
	}
	return nil
}

// openAcks returns the (forget, artifact) pairs the signed acks of the
// open forgets cover.
func (s *Holders) openAcks(ctx context.Context) (map[[2]shredd.ID]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT k.forget, k.artifact FROM acked k JOIN forgets f ON f.id = k.forget
		WHERE f.committed_at IS NOT NULL AND f.erased_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("erasure: list holders: %w", err)
	}
	defer rows.Close()
	out := map[[2]shredd.ID]bool{}
	for rows.Next() {
		var fb, ab []byte
		if err := rows.Scan(&fb, &ab); err != nil {
			return nil, fmt.Errorf("erasure: list holders: %w", err)
		}
		var k [2]shredd.ID
		copy(k[0][:], fb)
		copy(k[1][:], ab)
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: list holders: %w", err)
	}
	return out, nil
}

// eachHolderRow runs a query of rows (holder, a, b) over the holders from
// first to last and calls set for those of the page (at); holders of
// artifacts or acks who are not on the page (or not registered) are
// skipped.
func (s *Holders) eachHolderRow(ctx context.Context, query, first, last string, set func(h *shredd.HolderStatus, a, b int64), at map[string]*shredd.HolderStatus) error {
	rows, err := s.db.QueryContext(ctx, query, first, last)
	if err != nil {
		return fmt.Errorf("erasure: list holders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var a, b int64
		if err := rows.Scan(&id, &a, &b); err != nil {
			return fmt.Errorf("erasure: list holders: %w", err)
		}
		if h := at[id]; h != nil {
			set(h, a, b)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("erasure: list holders: %w", err)
	}
	return nil
}
