package erasure_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestRekeyPassBounded: a reconcile re-keys a backlog of committed forgets
// in passes of at most the pass size, each held in memory alone, and marks
// every forget of the backlog re-keyed; with the pass size as built, the
// same backlog is one pass of all of it, so the bound is what keeps the
// passes small.
func TestRekeyPassBounded(t *testing.T) {
	t.Run("pass of 3", func(t *testing.T) { checkRekeyPasses(t, 3, 3, 7) })
	t.Run("pass as built", func(t *testing.T) { checkRekeyPasses(t, 0, 20, 1) })
}

// checkRekeyPasses forgets 20 subjects, then reconciles with passes of
// pass forgets (0: as built): each pass reads at most maxRead, passes of
// them together read the 20, and every forget ends re-keyed.
func checkRekeyPasses(t *testing.T, pass, maxRead, passes int) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Keystore: keystore.Options{Buckets: 16}})
	s := st.Both()
	var ids []shredd.ID
	for i := range 20 {
		subject := fmt.Sprint("pass-", i)
		shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{subject}}, "record")
		release := erasure.HoldWork(t, s.Eraser) // keep the background from re-keying first
		f, err := s.Forget(ctx, subject)
		release()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	var reads []int
	defer erasure.OnRekeyPass(s.Eraser, pass, func(n int) { reads = append(reads, n) })()
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range reads {
		total += n
		if n > maxRead {
			t.Errorf("a pass read %d forgets, want at most %d", n, maxRead)
		}
	}
	if len(reads) != passes || total != len(ids) {
		t.Errorf("passes read %v: %d passes of %d forgets, want %d passes of %d", reads, len(reads), total, passes, len(ids))
	}
	for _, id := range ids {
		var rekeyed sql.NullInt64
		if err := st.DB.QueryRowContext(ctx, `SELECT rekeyed_at FROM forgets WHERE id=?`, id[:]).Scan(&rekeyed); err != nil {
			t.Fatal(err)
		}
		if !rekeyed.Valid {
			t.Errorf("forget %s not re-keyed after the reconcile", id)
		}
	}
}
