package attest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/shredd/shredd/attest"
)

// openErrors are the errors Open may return.
var openErrors = []error{attest.ErrFormat, attest.ErrSignature, attest.ErrKey, attest.ErrClaim, attest.ErrCondition,
	attest.ErrTimeline, attest.ErrKeyEvidence, attest.ErrAck, attest.ErrResidual}

func isOpenError(err error) bool {
	for _, e := range openErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func compact(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("an envelope Open accepted does not compact: %v", err)
	}
	return buf.Bytes()
}

// The seeds are attestations of several kilobytes: run the fuzzers with a
// short minimization, or each new input is minimized for a minute:
//
//	go test ./attest -run XXX -fuzz FuzzOpen -fuzzminimizetime 1s

// FuzzOpen checks that Open never panics, fails only with its documented
// errors, and never accepts a modified envelope: whatever it accepts is one
// of the envelopes the test key signed, up to whitespace between tokens,
// and gives back exactly the signed statement.
func FuzzOpen(f *testing.F) {
	var signedEnvs [][]byte
	for _, g := range goldens {
		b := signed(f, g.statement(f))
		signedEnvs = append(signedEnvs, b)
		f.Add(b)
		var pretty bytes.Buffer
		json.Indent(&pretty, b, "", "  ")
		f.Add(pretty.Bytes())
		// Signed by the right key but refused for its content.
		st := g.statement(f)
		st.Predicate.Conditions[0].Status = attest.StatusPending
		f.Add(signUnchecked(f, st, signingKey()))
	}
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"","signatures":[{"keyid":"","sig":""}]}`))
	f.Add([]byte(`{}`))
	pub := pubOf(signingKey())
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := attest.Open(data, pub)
		if err != nil {
			if st != nil {
				t.Fatal("Open returned a statement with an error")
			}
			if !isOpenError(err) {
				t.Fatalf("undocumented error: %v", err)
			}
			return
		}
		c := compact(t, data)
		known := false
		for _, s := range signedEnvs {
			known = known || bytes.Equal(c, s)
		}
		if !known {
			t.Fatalf("Open accepted an envelope the key never signed:\n%s", data)
		}
		var env attest.Envelope
		json.Unmarshal(c, &env)
		if back, err := st.Marshal(); err != nil || !bytes.Equal(back, env.Payload) {
			t.Fatalf("the statement Open returned is not the signed payload: %v", err)
		}
	})
}

// FuzzParseStatement checks that ParseStatement never panics and accepts
// only canonical payloads: Marshal gives back exactly the input.
func FuzzParseStatement(f *testing.F) {
	for _, g := range goldens {
		st := g.statement(f)
		b, _ := st.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := attest.ParseStatement(data)
		if err != nil {
			if !isOpenError(err) {
				t.Fatalf("undocumented error: %v", err)
			}
			return
		}
		back, err := st.Marshal()
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("accepted a payload that does not marshal back to itself: %v\n%s\n%s", err, data, back)
		}
		if err := st.Validate(); err != nil {
			t.Fatalf("accepted a statement that does not validate: %v", err)
		}
	})
}
