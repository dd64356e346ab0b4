package erasure_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/translog"
)

// journaled is a service with a transparency log, as cmd/shredd wires it.
type journaled struct {
	svc    *shreddtest.Service
	keys   *keystore.Tree
	log    *translog.Log
	vkey   string
	key    *attest.Signer
	hasher *registry.Hasher
	clock  *shreddtest.Clock
}

func newJournaled(t testing.TB) *journaled {
	t.Helper()
	c := shreddtest.NewClock()
	st := shreddtest.New(t, onClock(c, shreddtest.Options{Log: true, Kinds: []string{"episodic", "summary"}}))
	return &journaled{svc: st.Both(), keys: st.Keys, log: st.Log, vkey: st.LogVKey, key: st.Signer, hasher: st.Hasher, clock: c}
}

// entries reads the whole log back as events.
func (j *journaled) entries(t *testing.T) []*attest.Event {
	t.Helper()
	ctx := context.Background()
	n, err := j.log.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*attest.Event
	for i := int64(0); i < n; i++ {
		data, err := j.log.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := attest.OpenEvent(data, j.key.Public())
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		out = append(out, ev)
	}
	return out
}

func kinds(evs []*attest.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return out
}

// TestJournalLogsTheLifecycle follows a subject from its first encrypt to
// its erasure and checks the log holds each event once, in order, tied to
// the subject by the commitment that the forget's salt opens, and that the
// export of the forget verifies offline.
func TestJournalLogsTheLifecycle(t *testing.T) {
	ctx := context.Background()
	j := newJournaled(t)
	s := j.svc
	if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{"alice@example.com"}}, []byte("tea"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{"alice@example.com", "bob@example.com"}}, []byte("both"), nil); err != nil {
		t.Fatal(err)
	}
	if got := kinds(j.entries(t)); len(got) != 2 || got[0] != attest.EventKeyCreated || got[1] != attest.EventKeyCreated {
		t.Fatalf("after two subjects' first encrypts the log holds %v, want two key_created", got)
	}
	before, err := j.log.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Forget(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Forget(ctx, "alice@example.com"); err != nil || again.ID != f.ID {
		t.Fatalf("a second forget: %v", err)
	}
	evs := j.entries(t)
	if got := kinds(evs); len(got) != 3 || got[2] != attest.EventForgetCommitted {
		t.Fatalf("after the forget (twice) the log holds %v, want one forget_committed", got)
	}
	fc := evs[2].Forget
	commitment := attest.Commit("alice@example.com", f.Salt)
	if fc.Forget != f.ID.String() || fc.Subject != commitment || fc.Generation != 1 {
		t.Fatalf("forget_committed %+v, want forget %s with the commitment the salt opens", fc, f.ID)
	}
	if fc.KeyCreated < 0 || evs[fc.KeyCreated].Key.Subject != commitment {
		t.Fatalf("forget_committed names key_created %d; the same commitment must be there", fc.KeyCreated)
	}
	other := 1 - fc.KeyCreated
	if evs[other].Key.Subject == commitment || attest.CheckCommitment("bob@example.com", f.Salt, evs[other].Key.Subject) {
		t.Fatal("bob's key_created entry opens with alice's salt")
	}
	// Nothing in the log names a subject: no raw id, no sid.
	for i := int64(0); i < 3; i++ {
		data, _ := j.log.Entry(ctx, i)
		for _, secret := range []string{"alice@example.com", "bob@example.com"} {
			if bytes.Contains(data, []byte(secret)) {
				t.Fatalf("entry %d holds a raw subject id", i)
			}
		}
	}

	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	j.clock.Add(time.Hour / 2) // past the cache TTL and the lease TTL
	g, err := s.Verify(ctx, f.ID)
	if err != nil || g.State != shredd.StateErased {
		t.Fatalf("verify: %v %s %+v", err, g.State, conditions(g))
	}
	evs = j.entries(t)
	want := []string{attest.EventKeyCreated, attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventEpochCompleted, attest.EventErasureAttested}
	if got := kinds(evs); !equalStrings(got, want) {
		t.Fatalf("the log holds %v, want %v", got, want)
	}
	att, err := s.Attestation(ctx, f.ID) // stored: no key needed
	if err != nil {
		t.Fatal(err)
	}
	if evs[4].Attested.AttestationSHA256 != attest.Digest(att) {
		t.Fatal("the erasure_attested entry does not hold the SHA-256 of the attestation served")
	}
	if _, err := s.Verify(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(j.entries(t)); n != 5 {
		t.Fatalf("verifying an erased forget again logged more: %d entries", n)
	}

	// The export verifies offline, extending the checkpoint saved before.
	v, _ := note.NewVerifier(j.vkey)
	old, err := translog.OpenCheckpoint(before, v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Export(ctx, f.ID, old.Size)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bundle.Verify(b, bundle.Options{AttestationKey: j.key.Public(), LogKey: j.vkey,
		Subject: "alice@example.com", Salt: f.Salt, Saved: before})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.SubjectChecked || rep.Consistent == "" || len(rep.Entries) != 4 {
		t.Fatalf("report %+v: want the subject and consistency checked and 4 entries (bob's key_created left out)", rep)
	}
	if _, err := bundle.Verify(b, bundle.Options{AttestationKey: j.key.Public(), LogKey: j.vkey,
		Subject: "bob@example.com", Salt: f.Salt}); !errors.Is(err, bundle.ErrVerify) {
		t.Fatalf("bob's id opens alice's export: %v", err)
	}
	if _, err := s.Export(ctx, f.ID, 1<<40); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("since beyond the tree: %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestJournalIsAtomicWithTheChange: when an event cannot be logged, the
// change it records does not happen (a key created with no subject id to
// commit to is refused, and leaves neither a key nor an entry); an export
// before erasure is refused.
func TestJournalIsAtomicWithTheChange(t *testing.T) {
	ctx := context.Background()
	j := newJournaled(t)
	sid := envelope.SID{1, 2, 3}
	if _, err := j.keys.Key(ctx, sid); err == nil {
		t.Fatal("a key was created with nothing to commit to in the log")
	}
	if st, _, err := j.keys.State(ctx, sid); err != nil || st != keystore.SubjectUnknown {
		t.Fatalf("the refused key exists: state %v, %v", st, err)
	}
	if n, err := j.log.Size(ctx); err != nil || n != 0 {
		t.Fatalf("log size %d after a refused change, %v", n, err)
	}
	// The bulk path too: without ids nothing is created; with them, one
	// key_created entry per new key, none for a key that exists.
	ids := []string{"d1@example.com", "d2@example.com", "d3@example.com"}
	sids := []envelope.SID{j.hasher.SID(ids[0]), j.hasher.SID(ids[1]), j.hasher.SID(ids[2])}
	if err := j.keys.BulkCreateKeys(ctx, sids, nil); err == nil {
		t.Fatal("bulk keys were created with nothing to commit to in the log")
	}
	if n, _ := j.log.Size(ctx); n != 0 {
		t.Fatalf("log size %d after a refused bulk create", n)
	}
	if err := j.keys.BulkCreateKeys(ctx, sids[:2], ids[:2]); err != nil {
		t.Fatal(err)
	}
	if err := j.keys.BulkCreateKeys(ctx, sids, ids); err != nil {
		t.Fatal(err)
	}
	if got := kinds(j.entries(t)); len(got) != 3 {
		t.Fatalf("bulk creation of 3 keys logged %v", got)
	}
	base := int64(3)

	f, err := j.svc.Forget(ctx, "carol@example.com") // never seen: a tombstone, no key
	if err != nil {
		t.Fatal(err)
	}
	evs := j.entries(t)[base:]
	if len(evs) != 1 || evs[0].Forget == nil || evs[0].Forget.KeyCreated != -1 || evs[0].Forget.Generation != 0 {
		t.Fatalf("a forget of a subject never seen logged %v", kinds(evs))
	}
	if _, err := j.svc.Export(ctx, f.ID, 0); !errors.Is(err, shredd.ErrNotErased) {
		t.Fatalf("export before erasure: %v", err)
	}
}
