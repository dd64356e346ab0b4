package postgres

import "testing"

func TestRebind(t *testing.T) {
	for q, want := range map[string]string{
		`SELECT 1`:                                 `SELECT 1`,
		`SELECT a FROM t WHERE b=? AND c=?`:        `SELECT a FROM t WHERE b=$1 AND c=$2`,
		`SELECT '?', "a?" FROM t WHERE b=?`:        `SELECT '?', "a?" FROM t WHERE b=$1`,
		`WHERE (?3 IS NULL OR x = ?3) AND y < ?12`: `WHERE ($3 IS NULL OR x = $3) AND y < $12`,
		`SELECT 'it''s ?' WHERE a=?`:               `SELECT 'it''s ?' WHERE a=$1`,
	} {
		if got := rebind(q); got != want {
			t.Errorf("rebind(%q) = %q, want %q", q, got, want)
		}
	}
}
