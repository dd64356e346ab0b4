package erasure_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestForgetGroup: forgets of different subjects that wait together commit
// in one group, each with its own barrier covering the registrations
// acknowledged before it, and a forget whose read-back disagrees stalls
// alone (requested, with the reason) while the others of its group commit.
func TestForgetGroup(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	s := st.Both()
	const n = 8
	subjects := make([]string, n+1)
	recs := make([]shredd.Sealed, n+1)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("group-%d", i)
		recs[i] = shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{subjects[i]}}, "record of "+subjects[i])
	}
	stalled := n // the last subject's key deletion is ignored
	sid := st.Hasher.SID(subjects[stalled])
	defer plantIgnoreSID(t, st.DB, "subjects", "wrapped", sid[:])()

	out, errs := forgetAsOneGroup(ctx, s, subjects)

	for i := range subjects {
		if errs[i] != nil {
			t.Fatalf("forget %s: %v", subjects[i], errs[i])
		}
		f := out[i]
		if i == stalled {
			if f.State != shredd.StateRequested || !f.CommittedAt.IsZero() {
				t.Errorf("the stalled forget is %s, want requested", f.State)
			}
			if !strings.Contains(f.Conditions[0].Reason, "read back") {
				t.Errorf("the stalled forget's %s: %q, want the read-back's reason", f.Conditions[0].Name, f.Conditions[0].Reason)
			}
			if _, err := s.DecryptFor(ctx, recs[i].Ciphertext, nil, shredd.Reader{Holder: "w"}); err != nil {
				t.Errorf("decrypt of the stalled subject: %v", err)
			}
			continue
		}
		if f.State != shredd.StateCommitted {
			t.Errorf("forget %s is %s, want committed", subjects[i], f.State)
		}
		var seq int64
		if err := st.DB.QueryRowContext(ctx, `SELECT seq FROM artifacts WHERE id=?`, recs[i].Artifact[:]).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if f.Barrier < seq {
			t.Errorf("forget %s: barrier %d does not cover its record, registered at %d before it", subjects[i], f.Barrier, seq)
		}
		if _, err := s.DecryptFor(ctx, recs[i].Ciphertext, nil, shredd.Reader{Holder: "w"}); !errors.Is(err, shredd.ErrShredded) {
			t.Errorf("decrypt of %s after its forget: %v, want ErrShredded", subjects[i], err)
		}
	}
}

// TestReconcileMarksRekeyed: one reconcile pass re-keys the buckets of
// many committed forgets and marks every one of them re-keyed, with its
// marker (one statement for the pass's forgets); the records of the
// subjects not forgotten, in the same buckets, still open.
func TestReconcileMarksRekeyed(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Keystore: keystore.Options{Buckets: 16}})
	s := st.Both()
	const n = 40
	recs := make([]shredd.Sealed, n)
	for i := range recs {
		recs[i] = shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("mark-", i)}}, fmt.Sprint("record ", i))
	}
	var ids []shredd.ID
	for i := 0; i < n; i += 2 {
		f, err := s.Forget(ctx, fmt.Sprint("mark-", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var rekeyed, marker sql.NullInt64
		if err := st.DB.QueryRowContext(ctx, `SELECT rekeyed_at, rekey_marker FROM forgets WHERE id=?`, id[:]).Scan(&rekeyed, &marker); err != nil {
			t.Fatal(err)
		}
		if !rekeyed.Valid || !marker.Valid {
			t.Errorf("forget %s: rekeyed_at %v, rekey_marker %v after the pass", id, rekeyed, marker)
		}
	}
	for i := 1; i < n; i += 2 {
		if got, err := s.DecryptFor(ctx, recs[i].Ciphertext, nil, shredd.Reader{Holder: "w"}); err != nil || string(got.Plaintext) != fmt.Sprint("record ", i) {
			t.Fatalf("record %d after the re-key: %v", i, err)
		}
	}
}

// TestGroupAnswersMatchAlone: the forgets of one group are answered from
// one read of all of them (their rows and their verifications' facts);
// each answer says what the forget read alone says: subjects with a
// plaintext-held artifact, a lease issued before the forget, or neither.
func TestGroupAnswersMatchAlone(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	s := st.Both()
	subjects := []string{"held", "leased", "plain", "nothing"}
	for _, subject := range subjects[:3] {
		rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{subject}}, "record of "+subject)
		switch subject {
		case "held":
			if _, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"}); err != nil {
				t.Fatal(err)
			}
		case "leased":
			if _, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "worker-1"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, errs := forgetAsOneGroup(ctx, s, subjects)
	status := func(f shredd.Forget, name string) string {
		for _, c := range f.Verification {
			if c.Name == name {
				return c.Status
			}
		}
		return "absent"
	}
	for i, subject := range subjects {
		if errs[i] != nil {
			t.Fatalf("forget %s: %v", subject, errs[i])
		}
		alone, err := s.GetForget(ctx, out[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(out[i].Verification), fmt.Sprint(alone.Verification); got != want {
			t.Errorf("forget of %s answered in its group:\n%s\nread alone:\n%s", subject, got, want)
		}
		if out[i].State != alone.State || out[i].Barrier != alone.Barrier {
			t.Errorf("forget of %s: answered %s (barrier %d), read alone %s (barrier %d)", subject, out[i].State, out[i].Barrier, alone.State, alone.Barrier)
		}
		cascade, workers := status(out[i], shredd.CondCascadeClosed), status(out[i], shredd.CondWorkersQuiesced)
		wantCascade, wantWorkers := "ok", "ok"
		switch subject {
		case "held":
			wantCascade = "pending"
		case "leased":
			wantWorkers = "pending"
		}
		if cascade != wantCascade || workers != wantWorkers {
			t.Errorf("forget of %s: cascade %s, workers %s; want %s, %s", subject, cascade, workers, wantCascade, wantWorkers)
		}
	}
}

// TestForgetAgainOfRequested: a forget left requested (its key deletion
// did not read back), forgotten again, answers with the same forget: the
// first attempt finds the subject taken in the group's insert, the next
// reads the forget; once the deletion reads back, forgetting again commits
// that same forget, and the subject's records no longer open.
func TestForgetAgainOfRequested(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	s := st.Both()
	const subject = "again-requested"
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{subject}}, "record of "+subject)
	sid := st.Hasher.SID(subject)
	unplant := plantIgnoreSID(t, st.DB, "subjects", "wrapped", sid[:])
	first, err := s.Forget(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if first.State != shredd.StateRequested {
		t.Fatalf("the forget whose deletion is ignored is %s, want requested", first.State)
	}
	again, err := s.Forget(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.State != shredd.StateRequested {
		t.Fatalf("forgotten again: %s %s, want %s requested", again.ID, again.State, first.ID)
	}
	unplant()
	done, err := s.Forget(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if done.ID != first.ID || done.State != shredd.StateCommitted {
		t.Fatalf("forgotten once the deletion reads back: %s %s, want %s committed", done.ID, done.State, first.ID)
	}
	var n int
	if err := st.DB.QueryRowContext(ctx, `SELECT count(*) FROM forgets WHERE sid=?`, sid[:]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d forgets of the subject, want 1", n)
	}
	if _, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "w"}); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("decrypt after the forget committed: %v, want ErrShredded", err)
	}
}

// forgetAsOneGroup forgets every subject at once, all held until each is
// queued (erasure.HoldForgets), so that they commit as one group; it
// returns each forget's answer and error.
func forgetAsOneGroup(ctx context.Context, s *shreddtest.Service, subjects []string) ([]shredd.Forget, []error) {
	queued, release := erasure.HoldForgets(s.Eraser)
	out := make([]shredd.Forget, len(subjects))
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	for i, subject := range subjects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = s.Forget(ctx, subject)
		}()
	}
	for queued() < len(subjects) {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	return out, errs
}
