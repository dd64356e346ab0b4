package derivation

import (
	"context"
	"fmt"
)

// CountForgets counts the forgets by state (every state of this package is
// present, 0 included) and how many are overdue: not shredded and past their
// deadline, as Forget.Overdue says. It is meant for every metrics scrape: the
// count by state reads only the state index, and the overdue count only the
// forgets not yet shredded.
func (s *Service) CountForgets(ctx context.Context) (byState map[string]int, overdue int, err error) {
	byState = map[string]int{StateRequested: 0, StateCommitted: 0, StateShredded: 0}
	rows, err := s.db.QueryContext(ctx, `SELECT state, count(*) FROM forgets GROUP BY state`)
	if err != nil {
		return nil, 0, fmt.Errorf("derivation: count forgets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, 0, fmt.Errorf("derivation: count forgets: %w", err)
		}
		byState[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("derivation: count forgets: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM forgets WHERE state IN (?, ?) AND shredded_at IS NULL AND deadline < ?`,
		StateRequested, StateCommitted, s.opts.Now().UnixNano()).Scan(&overdue); err != nil {
		return nil, 0, fmt.Errorf("derivation: count forgets: %w", err)
	}
	return byState, overdue, nil
}
