package attest_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"
)

func TestRoundTrip(t *testing.T) {
	for name, mk := range map[string]func(testing.TB) attest.Statement{"vault": vaultStatement, "local": localStatement} {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			env, err := attest.Sign(st, signingKey())
			if err != nil {
				t.Fatal(err)
			}
			if env.PayloadType != attest.PayloadType || len(env.Signatures) != 1 || env.Signatures[0].KeyID != attest.KeyID(pubOf(signingKey())) {
				t.Fatalf("envelope %+v", env)
			}
			want, _ := st.Marshal()
			if !bytes.Equal(env.Payload, want) {
				t.Fatal("the payload is not the statement's canonical encoding")
			}
			b, _ := json.Marshal(env)
			got, err := attest.Open(b, pubOf(signingKey()))
			if err != nil {
				t.Fatal(err)
			}
			// Equal up to nil lists, which Marshal writes as [] and
			// Open gives back empty.
			if back, _ := got.Marshal(); !bytes.Equal(back, want) {
				t.Fatalf("Open gave\n%s\nwant\n%s", back, want)
			}
			if !reflect.DeepEqual(got.Predicate.Artifacts, st.Predicate.Artifacts) || !got.Predicate.Timeline.Erased.Equal(st.Predicate.Timeline.Erased) {
				t.Fatal("Open's statement differs from the signed one")
			}
			// Whitespace between tokens does not matter (a pretty-printed file).
			var pretty bytes.Buffer
			json.Indent(&pretty, b, "", "  ")
			if _, err := attest.Open(pretty.Bytes(), pubOf(signingKey())); err != nil {
				t.Fatalf("indented envelope: %v", err)
			}
		})
	}
}

func TestCommitment(t *testing.T) {
	salt := testSalt()
	c := attest.Commit(testSubject, salt)
	if len(c) != 64 || strings.ToLower(c) != c {
		t.Fatalf("commitment %q", c)
	}
	if !attest.CheckCommitment(testSubject, salt, c) {
		t.Fatal("the commitment does not check")
	}
	other := attest.NewSalt()
	if len(other) != attest.SaltSize || bytes.Equal(other, salt) || bytes.Equal(other, attest.NewSalt()) {
		t.Fatal("NewSalt is not random")
	}
	upper := strings.ToUpper(c)
	for _, tc := range []struct {
		name, subject string
		salt          []byte
		commitment    string
	}{
		{"other subject", "alice@example.org", salt, c},
		{"prefix of the subject", "alice@example.co", salt, c},
		{"other salt", testSubject, other, c},
		{"short salt", testSubject, salt[:31], c},
		{"salt moved into the subject", string(salt[31:]) + testSubject, salt[:31], c},
		{"empty commitment", testSubject, salt, ""},
		{"truncated commitment", testSubject, salt, c[:62]},
		{"not hex", testSubject, salt, "zz" + c[2:]},
	} {
		if attest.CheckCommitment(tc.subject, tc.salt, tc.commitment) {
			t.Errorf("%s: checks", tc.name)
		}
	}
	// Hex digits decode either way; the statement itself insists on lower case.
	if !attest.CheckCommitment(testSubject, salt, upper) {
		t.Error("upper-case hex does not check")
	}
	st := vaultStatement(t)
	if err := st.CheckSubject(testSubject, salt); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckSubject("mallory@example.com", salt); !errors.Is(err, attest.ErrCommitment) {
		t.Fatalf("wrong subject: %v", err)
	}
	if _, err := attest.ParseSalt(hex.EncodeToString(salt)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "00", hex.EncodeToString(salt)[:62], hex.EncodeToString(salt) + "00", "x" + hex.EncodeToString(salt)[1:]} {
		if _, err := attest.ParseSalt(s); !errors.Is(err, attest.ErrFormat) {
			t.Errorf("ParseSalt(%q): %v", s, err)
		}
	}
}

// TestCommitKnownAnswer pins the construction: SHA-256 of the label, a
// zero byte, the salt and the subject id. The value was computed with
// coreutils (docs/attestation.md shows the command).
func TestCommitKnownAnswer(t *testing.T) {
	salt := make([]byte, 32)
	for i := range salt {
		salt[i] = byte(i)
	}
	const want = "79942217c138e4433c5dca5a4a7b851fe16f53f73112fd3f970d2f234519b99b"
	if got := attest.Commit("alice@example.com", salt); got != want {
		t.Fatalf("Commit = %s, want %s", got, want)
	}
}

func TestPAE(t *testing.T) {
	// The DSSE protocol's test vector.
	got := attest.PAE("http://example.com/HelloWorld", []byte("hello world"))
	if want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"; string(got) != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
	if got := attest.PAE("", nil); string(got) != "DSSEv1 0  0 " {
		t.Fatalf("empty PAE = %q", got)
	}
}

func TestWrongKey(t *testing.T) {
	b := signed(t, vaultStatement(t))
	_, err := attest.Open(b, pubOf(otherKey()))
	if !errors.Is(err, attest.ErrSignature) {
		t.Fatalf("other key: %v", err)
	}
	// A key id rewritten to name the other key does not help: the
	// signature still does not verify.
	var env attest.Envelope
	json.Unmarshal(b, &env)
	env.Signatures[0].KeyID = attest.KeyID(pubOf(otherKey()))
	b2, _ := json.Marshal(env)
	if _, err := attest.Open(b2, pubOf(otherKey())); !errors.Is(err, attest.ErrSignature) {
		t.Fatalf("other key, rewritten key id: %v", err)
	}
	if _, err := attest.Open(b, pubOf(signingKey())[:31]); !errors.Is(err, attest.ErrKey) {
		t.Fatalf("short key: %v", err)
	}
	// A statement signed by the other key does not open under ours.
	env2, err := attest.Sign(vaultStatement(t), otherKey())
	if err != nil {
		t.Fatal(err)
	}
	b3, _ := json.Marshal(env2)
	if _, err := attest.Open(b3, pubOf(signingKey())); !errors.Is(err, attest.ErrSignature) {
		t.Fatalf("signed by the other key: %v", err)
	}
}

// TestEverySingleByteChange changes each byte of the envelope JSON (its
// payload and signature strings included) to a neighbouring byte and to a
// space, and flips a bit of each base64-decoded payload and signature
// byte: none may open.
func TestEverySingleByteChange(t *testing.T) {
	b := signed(t, vaultStatement(t))
	pub := pubOf(signingKey())
	tried := 0
	for i := range b {
		for _, r := range []byte{b[i] ^ 0x01, ' '} {
			if r == b[i] {
				continue
			}
			m := bytes.Clone(b)
			m[i] = r
			tried++
			if _, err := attest.Open(m, pub); err == nil {
				t.Fatalf("byte %d changed from %q to %q: opens", i, b[i], r)
			}
		}
	}
	var env attest.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	flip := func(field []byte, what string) {
		for i := range field {
			field[i] ^= 0x01
			m, _ := json.Marshal(env)
			tried++
			if _, err := attest.Open(m, pub); !errors.Is(err, attest.ErrSignature) {
				t.Fatalf("%s byte %d flipped: %v, want ErrSignature", what, i, err)
			}
			field[i] ^= 0x01
		}
	}
	flip(env.Payload, "payload")
	flip(env.Signatures[0].Sig, "signature")
	t.Logf("%d changed envelopes refused", tried)
}

func TestEnvelopeStrict(t *testing.T) {
	b := signed(t, vaultStatement(t))
	pub := pubOf(signingKey())
	var env attest.Envelope
	json.Unmarshal(b, &env)
	payload64 := base64.StdEncoding.EncodeToString(env.Payload)
	sig64 := base64.StdEncoding.EncodeToString(env.Signatures[0].Sig)
	keyid := env.Signatures[0].KeyID
	withSig := func(sigs string) string {
		return `{"payloadType":"application/vnd.in-toto+json","payload":"` + payload64 + `","signatures":[` + sigs + `]}`
	}
	oneSig := `{"keyid":"` + keyid + `","sig":"` + sig64 + `"}`
	if _, err := attest.Open([]byte(withSig(oneSig)), pub); err != nil {
		t.Fatalf("the hand-written canonical envelope: %v", err)
	}
	for _, tc := range []struct{ name, json string }{
		{"empty", ``},
		{"null", `null`},
		{"two signatures", withSig(oneSig + "," + oneSig)},
		{"no signature", withSig("")},
		{"unknown field", strings.Replace(withSig(oneSig), `{"payloadType"`, `{"x":1,"payloadType"`, 1)},
		{"duplicate payload", strings.Replace(withSig(oneSig), `"payload":`, `"payload":"","payload":`, 1)},
		{"case-folded key", strings.Replace(withSig(oneSig), `"payload":`, `"Payload":`, 1)},
		{"reordered keys", `{"payload":"` + payload64 + `","payloadType":"application/vnd.in-toto+json","signatures":[` + oneSig + `]}`},
		{"base64 with a line break", strings.Replace(withSig(oneSig), payload64, payload64[:76]+`\n`+payload64[76:], 1)},
		{"escaped character", strings.Replace(withSig(oneSig), `application/vnd`, `application\/vnd`, 1)},
		{"trailing data", withSig(oneSig) + `{}`},
		{"other payload type", strings.Replace(withSig(oneSig), "vnd.in-toto+json", "json", 1)},
		{"no keyid", withSig(`{"sig":"` + sig64 + `"}`)},
	} {
		if _, err := attest.Open([]byte(tc.json), pub); err == nil {
			t.Errorf("%s: opens", tc.name)
		}
	}
	if _, err := attest.Open(bytes.Repeat([]byte(" "), attest.MaxEnvelopeSize+1), pub); !errors.Is(err, attest.ErrFormat) {
		t.Errorf("oversized: %v", err)
	}
}

// TestRefused checks each rule of Validate: Sign refuses to sign the
// statement, and a statement signed anyway (signUnchecked) does not open,
// both with the same error.
func TestRefused(t *testing.T) {
	later := func(s string, d time.Duration) time.Time { return at(s).Add(d) }
	for _, tc := range []struct {
		name   string
		change func(*attest.Statement)
		want   error
	}{
		{"statement type", func(s *attest.Statement) { s.Type = "https://in-toto.io/Statement/v0.1" }, attest.ErrFormat},
		{"predicate type", func(s *attest.Statement) { s.PredicateType = "https://shredd.dev/attestation/erasure/v2" }, attest.ErrFormat},
		{"no subject", func(s *attest.Statement) { s.Subject = nil }, attest.ErrFormat},
		{"two subjects", func(s *attest.Statement) { s.Subject = append(s.Subject, s.Subject[0]) }, attest.ErrFormat},
		{"subject name", func(s *attest.Statement) { s.Subject[0].Name = "alice@example.com" }, attest.ErrFormat},
		{"digest algorithm", func(s *attest.Statement) {
			s.Subject[0].Digest = map[string]string{"sha512": s.Subject[0].Digest["sha256"]}
		}, attest.ErrFormat},
		{"second digest", func(s *attest.Statement) { s.Subject[0].Digest["sha1"] = "00" }, attest.ErrFormat},
		{"upper-case digest", func(s *attest.Statement) {
			s.Subject[0].Digest["sha256"] = strings.ToUpper(s.Subject[0].Digest["sha256"])
		}, attest.ErrFormat},
		{"wording: deleted", func(s *attest.Statement) { s.Predicate.Claim = "deleted" }, attest.ErrClaim},
		{"wording: capitalised", func(s *attest.Statement) { s.Predicate.Claim = "Cryptographically erased" }, attest.ErrClaim},
		{"wording: empty", func(s *attest.Statement) { s.Predicate.Claim = "" }, attest.ErrClaim},
		{"no forget id", func(s *attest.Statement) { s.Predicate.Forget = "" }, attest.ErrFormat},
		{"forget id with a space", func(s *attest.Statement) { s.Predicate.Forget = "a b" }, attest.ErrFormat},
		{"pending condition", func(s *attest.Statement) {
			s.Predicate.Conditions[1].Status = attest.StatusPending
		}, attest.ErrCondition},
		{"missing condition", func(s *attest.Statement) { s.Predicate.Conditions = s.Predicate.Conditions[:4] }, attest.ErrCondition},
		{"repeated condition", func(s *attest.Statement) { s.Predicate.Conditions[4] = s.Predicate.Conditions[0] }, attest.ErrCondition},
		{"unknown condition", func(s *attest.Statement) {
			s.Predicate.Conditions = append(s.Predicate.Conditions, attest.Condition{Name: "key_destroyed", Status: "ok", Evidence: "x"})
		}, attest.ErrCondition},
		{"ok without evidence", func(s *attest.Statement) { s.Predicate.Conditions[2].Evidence = " " }, attest.ErrCondition},
		{"no conditions", func(s *attest.Statement) { s.Predicate.Conditions = nil }, attest.ErrCondition},
		{"committed before requested", func(s *attest.Statement) {
			s.Predicate.Timeline.Committed = later("2026-03-01T10:00:00Z", -time.Nanosecond)
		}, attest.ErrTimeline},
		{"erased before shredded", func(s *attest.Statement) {
			s.Predicate.Timeline.Erased = later("2026-03-01T10:05:00Z", -time.Second)
		}, attest.ErrTimeline},
		{"no erased time", func(s *attest.Statement) { s.Predicate.Timeline.Erased = time.Time{} }, attest.ErrTimeline},
		{"not UTC", func(s *attest.Statement) {
			s.Predicate.Timeline.Erased = s.Predicate.Timeline.Erased.In(time.FixedZone("CET", 3600))
		}, attest.ErrTimeline},
		{"unknown root store", func(s *attest.Statement) { s.Predicate.KeyEvidence.RootStore = "hsm" }, attest.ErrFormat},
		{"no retired version", func(s *attest.Statement) { s.Predicate.KeyEvidence.RetiredRootVersions = nil }, attest.ErrKeyEvidence},
		{"no epoch", func(s *attest.Statement) { s.Predicate.KeyEvidence.Epoch = 0 }, attest.ErrKeyEvidence},
		{"versions not ascending", func(s *attest.Statement) { s.Predicate.KeyEvidence.RetiredRootVersions = []int{4, 3} }, attest.ErrFormat},
		{"exportable root key", func(s *attest.Statement) { s.Predicate.KeyEvidence.RootKeyConfig.Exportable = true }, attest.ErrKeyEvidence},
		{"plaintext backup allowed", func(s *attest.Statement) {
			s.Predicate.KeyEvidence.RootKeyConfig.AllowPlaintextBackup = true
		}, attest.ErrKeyEvidence},
		{"retired version still available", func(s *attest.Statement) {
			s.Predicate.KeyEvidence.RootKeyConfig.MinAvailableVersion = 4
		}, attest.ErrKeyEvidence},
		{"unknown closed_by", func(s *attest.Statement) { s.Predicate.Artifacts[0].ClosedBy = "deleted" }, attest.ErrFormat},
		{"repeated artifact", func(s *attest.Statement) { s.Predicate.Artifacts[1].ID = s.Predicate.Artifacts[0].ID }, attest.ErrFormat},
		{"artifact without kind", func(s *attest.Statement) { s.Predicate.Artifacts[0].Kind = "" }, attest.ErrFormat},
		{"ack signature on a sealed artifact", func(s *attest.Statement) {
			s.Predicate.Artifacts[0].AckSignature = s.Predicate.Artifacts[2].AckSignature
		}, attest.ErrFormat},
		{"holder_ack without an ack", func(s *attest.Statement) {
			s.Predicate.HolderAcks = nil
		}, attest.ErrAck},
		{"ack of another forget", func(s *attest.Statement) {
			s.Predicate.Forget = "another-forget"
		}, attest.ErrAck},
		{"ack signature altered", func(s *attest.Statement) {
			s.Predicate.HolderAcks[0].Signature = bytes.Clone(s.Predicate.HolderAcks[0].Signature)
			s.Predicate.HolderAcks[0].Signature[0] ^= 1
		}, attest.ErrAck},
		{"ack under another key", func(s *attest.Statement) {
			s.Predicate.HolderAcks[0].PublicKey = pubOf(otherKey())
		}, attest.ErrAck},
		{"artifact's ack signature differs", func(s *attest.Statement) {
			s.Predicate.Artifacts[3].AckSignature = bytes.Repeat([]byte{1}, 64)
		}, attest.ErrAck},
		{"ack names a sealed artifact", func(s *attest.Statement) {
			a := &s.Predicate.Artifacts[1]
			a.ClosedBy, a.Holder = attest.ClosedSealedKeyDestroyed, "ann-1"
			a.AckSignature = nil
			s.Predicate.Artifacts[3] = *a
			s.Predicate.Artifacts[3].ID = "c3d5e7f9a1b3405d8e6f1a2b3c4d5e6f"
		}, attest.ErrAck},
		{"no snapshot residual", func(s *attest.Statement) { s.Predicate.Residuals = s.Predicate.Residuals[1:] }, attest.ErrResidual},
		{"no holder trust residual", func(s *attest.Statement) { s.Predicate.Residuals = s.Predicate.Residuals[:2] }, attest.ErrResidual},
		{"residual without description", func(s *attest.Statement) { s.Predicate.Residuals[1].Description = "" }, attest.ErrResidual},
		{"residual kind", func(s *attest.Statement) { s.Predicate.Residuals[1].Kind = "Other Kind" }, attest.ErrResidual},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := vaultStatement(t)
			tc.change(&st)
			if _, err := attest.Sign(st, signingKey()); !errors.Is(err, tc.want) {
				t.Fatalf("Sign: %v, want %v", err, tc.want)
			}
			if _, err := attest.Open(signUnchecked(t, st, signingKey()), pubOf(signingKey())); !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPayloadStrict signs payloads that are not the canonical encoding of
// any statement: Open refuses each, although the signature verifies.
func TestPayloadStrict(t *testing.T) {
	st := vaultStatement(t)
	canon, _ := st.Marshal()
	var pretty bytes.Buffer
	json.Indent(&pretty, canon, "", " ")
	s := string(canon)
	for _, tc := range []struct{ name, payload string }{
		{"indented", pretty.String()},
		{"trailing newline", s + "\n"},
		{"unknown predicate field", strings.Replace(s, `"forget":`, `"note":"x","forget":`, 1)},
		{"unknown statement field", strings.Replace(s, `{"_type":`, `{"x":1,"_type":`, 1)},
		{"duplicate claim", strings.Replace(s, `"claim":`, `"claim":"pending","claim":`, 1)},
		{"case-folded key", strings.Replace(s, `"claim":`, `"Claim":`, 1)},
		{"null list", strings.Replace(s, `"holder_acks":[`, `"holder_acks":null,"x":[`, 1)},
		{"time with offset", strings.Replace(s, `"2026-03-01T10:06:30Z"`, `"2026-03-01T10:06:30+00:00"`, 1)},
		{"escaped letter", strings.Replace(s, `"cryptographically erased"`, `"cryptographically er\u0061sed"`, 1)},
		{"number as float", strings.Replace(s, `"epoch":7`, `"epoch":7.0`, 1)},
		{"not JSON", "cryptographically erased"},
	} {
		if tc.payload == s {
			t.Fatalf("%s: the replacement did not apply", tc.name)
		}
		_, err := attest.Open(signPayload(t, []byte(tc.payload), signingKey()), pubOf(signingKey()))
		if !errors.Is(err, attest.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", tc.name, err)
		}
	}
}

func TestKeys(t *testing.T) {
	key := signingKey()
	pubPEM, err := attest.MarshalPublicKey(pubOf(key))
	if err != nil {
		t.Fatal(err)
	}
	privPEM, err := attest.MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pubPEM, []byte("-----BEGIN PUBLIC KEY-----\n")) || !bytes.HasPrefix(privPEM, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Fatalf("PEM:\n%s\n%s", pubPEM, privPEM)
	}
	pub, err := attest.ParsePublicKey(pubPEM)
	if err != nil || !pub.Equal(pubOf(key)) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	k2, err := attest.ParsePrivateKey(privPEM)
	if err != nil || !k2.Equal(key) {
		t.Fatalf("ParsePrivateKey: %v", err)
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})
	ecPrivDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPrivPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPrivDER})
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"private key as public", privPEM},
		{"ECDSA", ecPEM},
		{"two blocks", append(bytes.Clone(pubPEM), pubPEM...)},
		{"trailing text", append(bytes.Clone(pubPEM), "x"...)},
		{"with headers", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"a": "b"}, Bytes: []byte{1}})},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}})},
	} {
		if _, err := attest.ParsePublicKey(tc.data); !errors.Is(err, attest.ErrKey) {
			t.Errorf("ParsePublicKey(%s): %v", tc.name, err)
		}
	}
	for _, data := range [][]byte{nil, pubPEM, ecPrivPEM} {
		if _, err := attest.ParsePrivateKey(data); !errors.Is(err, attest.ErrKey) {
			t.Errorf("ParsePrivateKey: %v", err)
		}
	}
	if _, err := attest.Sign(vaultStatement(t), key[:32]); !errors.Is(err, attest.ErrKey) {
		t.Errorf("Sign with a seed: %v", err)
	}
}

func TestAckMessage(t *testing.T) {
	got := string(attest.AckMessage("f1", "ann-1", []string{"b2", "a1"}))
	want := "shredd/v1/holder-ack\nforget f1\nholder ann-1\nartifact a1\nartifact b2\n"
	if got != want {
		t.Fatalf("AckMessage = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, forget, holder string
		ids                  []string
	}{
		{"no artifact", "f1", "ann-1", nil},
		{"repeated artifact", "f1", "ann-1", []string{"a1", "a1"}},
		{"newline in an id", "f1", "ann-1", []string{"a1\nartifact a2"}},
		{"no holder", "f1", "", []string{"a1"}},
		{"space in the forget id", "f 1", "ann-1", []string{"a1"}},
	} {
		if _, err := attest.SignAck(tc.forget, tc.holder, tc.ids, holderKey()); !errors.Is(err, attest.ErrAck) {
			t.Errorf("SignAck, %s: %v", tc.name, err)
		}
	}
}
