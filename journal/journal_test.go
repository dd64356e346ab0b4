package journal_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/translog"
)

// TestSignForgets checks that a group's forget events are signed in their
// order, each under the journal's key with the journal's clock, whether
// they are few (signed in turn) or many (signed on every processor), and
// that one invalid event fails the whole group with its name.
func TestSignForgets(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
	signer, err := attest.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.New(new(translog.Log), "log", signer, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 7, 8, 64, 301} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			evs := make([]attest.Event, n)
			ids := make([]string, n)
			for i := range evs {
				ids[i] = newID(t)
				evs[i] = attest.Event{Event: attest.EventForgetCommitted, Forget: &attest.ForgetEvent{
					Forget: ids[i], Subject: attest.Commit(fmt.Sprint("subject-", i), []byte("0123456789abcdef0123456789abcdef")),
					Generation: uint32(i + 1), Barrier: int64(i), KeyCreated: -1}}
			}
			signed, err := j.SignForgets(evs)
			if err != nil {
				t.Fatal(err)
			}
			entries := journal.SignedEntries(signed)
			if len(entries) != n {
				t.Fatalf("%d entries for %d events", len(entries), n)
			}
			for i, e := range entries {
				ev, err := attest.OpenEvent(e, pub)
				if err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				if ev.Forget == nil || ev.Forget.Forget != ids[i] || ev.Forget.Generation != uint32(i+1) || !ev.Time.Equal(at) {
					t.Fatalf("entry %d is %+v, want forget %s generation %d at %s", i, ev.Forget, ids[i], i+1, at)
				}
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		evs := make([]attest.Event, 20)
		for i := range evs {
			evs[i] = attest.Event{Event: attest.EventForgetCommitted, Forget: &attest.ForgetEvent{
				Forget: newID(t), Subject: attest.Commit("s", []byte("0123456789abcdef0123456789abcdef")), KeyCreated: -1}}
		}
		evs[13].Forget.Forget = "not an id"
		_, err := j.SignForgets(evs)
		if !errors.Is(err, attest.ErrFormat) {
			t.Fatalf("an invalid event signed: %v", err)
		}
	})
}

func newID(t *testing.T) string {
	t.Helper()
	id, err := shredd.NewID(time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}
