package attest_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"
)

var eventTime = time.Date(2026, 3, 1, 10, 0, 0, 12_000_000, time.UTC)

// events returns one valid event of each kind.
func events(t testing.TB) []attest.Event {
	commitment := attest.Commit("alice@example.com", fixed("salt"))
	ack, err := attest.SignAck("8c1f0e6a2b4d4e97a1c3f5e7092b4d6f", "replica-1", []string{"a1", "a2"}, holderKey())
	if err != nil {
		t.Fatal(err)
	}
	ackEv := attest.NewAckEvent("8c1f0e6a2b4d4e97a1c3f5e7092b4d6f", ack)
	base := attest.Event{Type: attest.EventType, Time: eventTime}
	withPart := func(kind string, set func(*attest.Event)) attest.Event {
		e := base
		e.Event = kind
		set(&e)
		return e
	}
	return []attest.Event{
		withPart(attest.EventKeyCreated, func(e *attest.Event) { e.Key = &attest.KeyEvent{Subject: commitment, Generation: 1} }),
		withPart(attest.EventForgetCommitted, func(e *attest.Event) {
			e.Forget = &attest.ForgetEvent{Forget: "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f", Subject: commitment, Generation: 1, Barrier: 0, KeyCreated: -1}
		}),
		withPart(attest.EventEpochCompleted, func(e *attest.Event) {
			e.Epoch = &attest.EpochEvent{Epoch: 3, RootStore: "local", FromVersion: 3, ToVersion: 4, Retired: []int{3}}
		}),
		withPart(attest.EventHolderAck, func(e *attest.Event) { e.Ack = &ackEv }),
		withPart(attest.EventErasureAttested, func(e *attest.Event) {
			e.Attested = &attest.AttestedEvent{Forget: "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f", Subject: commitment, AttestationSHA256: attest.Digest([]byte("x"))}
		}),
		withPart(attest.EventSubjectReinstated, func(e *attest.Event) {
			e.Reinstated = &attest.ReinstatedEvent{Subject: commitment, Generation: 2, Previous: 1, Forget: "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f"}
		}),
	}
}

// TestReinstatedInvalid: a subject_reinstated event names a commitment, a
// new generation above the destroyed one, and the forget it follows.
func TestReinstatedInvalid(t *testing.T) {
	cases := map[string]func(*attest.ReinstatedEvent){
		"raw id":            func(r *attest.ReinstatedEvent) { r.Subject = "alice@example.com" },
		"generation 0":      func(r *attest.ReinstatedEvent) { r.Generation, r.Previous = 0, 0 },
		"not above":         func(r *attest.ReinstatedEvent) { r.Previous = r.Generation },
		"no forget":         func(r *attest.ReinstatedEvent) { r.Forget = "" },
		"forget with space": func(r *attest.ReinstatedEvent) { r.Forget = "a b" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			evs := events(t)
			ev := evs[len(evs)-1]
			r := *ev.Reinstated
			mutate(&r)
			ev.Reinstated = &r
			if _, err := attest.SignEvent(ev, signingKey()); !errors.Is(err, attest.ErrFormat) {
				t.Fatalf("SignEvent: %v, want ErrFormat", err)
			}
		})
	}
	// A reinstatement after a forget of a subject that never had a key:
	// generation 0 destroyed, generation 1 starts.
	evs := events(t)
	ev := evs[len(evs)-1]
	ev.Reinstated = &attest.ReinstatedEvent{Subject: ev.Reinstated.Subject, Generation: 1, Previous: 0, Forget: ev.Reinstated.Forget}
	if _, err := attest.SignEvent(ev, signingKey()); err != nil {
		t.Fatal(err)
	}
}

func TestEventRoundTrip(t *testing.T) {
	pub := signingKey().Public().(ed25519.PublicKey)
	for _, ev := range events(t) {
		t.Run(ev.Event, func(t *testing.T) {
			entry, err := attest.SignEvent(ev, signingKey())
			if err != nil {
				t.Fatal(err)
			}
			if len(entry) > attest.MaxEventSize {
				t.Fatalf("entry of %d bytes", len(entry))
			}
			got, err := attest.OpenEvent(entry, pub)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(ev)
			have, _ := json.Marshal(got)
			if !bytes.Equal(want, have) {
				t.Fatalf("round trip:\n got %s\nwant %s", have, want)
			}
			// Another kind of DSSE envelope by the same key is refused, and
			// so is an event under another key.
			if _, err := attest.Open(entry, pub); !errors.Is(err, attest.ErrFormat) {
				t.Fatalf("an event opened as an attestation: %v", err)
			}
			if _, err := attest.OpenEvent(entry, otherKey().Public().(ed25519.PublicKey)); !errors.Is(err, attest.ErrSignature) {
				t.Fatalf("an event opened under another key: %v", err)
			}
			// Every single-byte change is refused.
			for i := range entry {
				m := bytes.Clone(entry)
				m[i] ^= 0x01
				if _, err := attest.OpenEvent(m, pub); err == nil {
					t.Fatalf("byte %d flipped, still opens", i)
				}
			}
		})
	}
}

func TestEventInvalid(t *testing.T) {
	evs := events(t)
	cases := map[string]func(*attest.Event){
		"type":          func(e *attest.Event) { e.Type = "x" },
		"local time":    func(e *attest.Event) { e.Time = e.Time.In(time.FixedZone("X", 3600)) },
		"no time":       func(e *attest.Event) { e.Time = time.Time{} },
		"wrong kind":    func(e *attest.Event) { e.Event = attest.EventForgetCommitted },
		"two parts":     func(e *attest.Event) { e.Epoch = evs[2].Epoch },
		"no part":       func(e *attest.Event) { e.Key = nil },
		"generation 0":  func(e *attest.Event) { e.Key.Generation = 0 },
		"raw id":        func(e *attest.Event) { e.Key.Subject = "alice@example.com" },
		"upper hex":     func(e *attest.Event) { e.Key.Subject = strings.ToUpper(e.Key.Subject) },
		"unknown event": func(e *attest.Event) { e.Event = "key_deleted" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			ev := events(t)[0]
			k := *ev.Key
			ev.Key = &k
			mutate(&ev)
			if _, err := attest.SignEvent(ev, signingKey()); !errors.Is(err, attest.ErrFormat) {
				t.Fatalf("SignEvent: %v, want ErrFormat", err)
			}
		})
	}
	if _, err := attest.SignEvent(evs[0], nil); !errors.Is(err, attest.ErrKey) {
		t.Fatalf("no key: %v", err)
	}
}

// TestEventStrict: a payload that is not the canonical encoding (an extra
// field, reordered fields) is refused even when signed.
func TestEventStrict(t *testing.T) {
	key := signingKey()
	pub := key.Public().(ed25519.PublicKey)
	for name, payload := range map[string]string{
		"unknown field": `{"_type":"https://shredd.dev/log-event/v1","event":"key_created","time":"2026-03-01T10:00:00.012Z","key":{"subject":"` + strings.Repeat("a", 64) + `","generation":1},"extra":1}`,
		"reordered":     `{"event":"key_created","_type":"https://shredd.dev/log-event/v1","time":"2026-03-01T10:00:00.012Z","key":{"subject":"` + strings.Repeat("a", 64) + `","generation":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			env := attest.Envelope{PayloadType: attest.EventPayloadType, Payload: []byte(payload),
				Signatures: []attest.Signature{{KeyID: attest.KeyID(pub), Sig: ed25519.Sign(key, attest.PAE(attest.EventPayloadType, []byte(payload)))}}}
			b, _ := json.Marshal(env)
			if _, err := attest.OpenEvent(b, pub); !errors.Is(err, attest.ErrFormat) {
				t.Fatalf("OpenEvent: %v, want ErrFormat", err)
			}
		})
	}
}

// FuzzOpenEvent: OpenEvent never panics, and whatever it accepts is one of
// the signed events.
func FuzzOpenEvent(f *testing.F) {
	var signed [][]byte
	for _, ev := range events(f) {
		b, err := attest.SignEvent(ev, signingKey())
		if err != nil {
			f.Fatal(err)
		}
		signed = append(signed, b)
		f.Add(b)
	}
	pub := signingKey().Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := attest.OpenEvent(data, pub)
		if err != nil {
			if ev != nil || !isOpenError(err) {
				t.Fatalf("OpenEvent: %v with event %v", err, ev)
			}
			return
		}
		var buf bytes.Buffer
		if json.Compact(&buf, data) != nil {
			t.Fatal("accepted JSON does not compact")
		}
		for _, s := range signed {
			if bytes.Equal(buf.Bytes(), s) {
				return
			}
		}
		t.Fatalf("accepted an event the key never signed: %s", data)
	})
}
