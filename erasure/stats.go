package erasure

import (
	"context"
	"fmt"

	"github.com/shredd/shredd"
)

// CountForgets counts the forgets by pipeline state, with the erased ones
// counted as erased (every state of this package is present, 0 included),
// and how many are overdue: not erased and past their deadline, as
// Forget.Overdue says. It is meant for every metrics scrape: two grouped
// counts over the forgets table.
func (s *Eraser) CountForgets(ctx context.Context) (byState map[string]int, overdue int, err error) {
	byState = map[string]int{shredd.StateRequested: 0, shredd.StateCommitted: 0, shredd.StateShredded: 0, shredd.StateErased: 0}
	rows, err := s.db.QueryContext(ctx, `SELECT CASE WHEN erased_at IS NOT NULL THEN ? ELSE state END, count(*) FROM forgets GROUP BY 1`, shredd.StateErased)
	if err != nil {
		return nil, 0, fmt.Errorf("erasure: count forgets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, 0, fmt.Errorf("erasure: count forgets: %w", err)
		}
		byState[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("erasure: count forgets: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM forgets WHERE erased_at IS NULL AND deadline < ?`,
		s.opts.Now().UnixNano()).Scan(&overdue); err != nil {
		return nil, 0, fmt.Errorf("erasure: count forgets: %w", err)
	}
	return byState, overdue, nil
}
