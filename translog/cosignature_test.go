package translog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testCheckpoint signs a checkpoint of a log named origin with a new key.
func testCheckpoint(t *testing.T, origin string, size int64) (signed []byte, log note.Verifier, c Checkpoint) {
	t.Helper()
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	c = Checkpoint{Origin: origin, Size: size, Hash: tlog.Hash(sha256.Sum256([]byte(origin)))}
	signed, err = note.Sign(&note.Note{Text: c.String()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return signed, v, c
}

func newWitnessKey(t *testing.T, name string, now time.Time) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := GenerateCosignerKey(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCosigner(skey, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}

// TestCosignatureFormat checks a cosignature/v1 signature byte for byte
// against the spec (c2sp.org/tlog-cosignature), independently of the
// signer: the key ID is SHA-256(name || "\n" || 0x04 || key)[:4], the
// signature is an 8-byte big-endian timestamp and an Ed25519 signature of
// "cosignature/v1\ntime <t>\n" followed by the checkpoint's note text; and
// the verifier key has type 0x04.
func TestCosignatureFormat(t *testing.T) {
	when := time.Unix(1679315147, 0)
	signed, logV, c := testCheckpoint(t, "example.com/behind-the-sofa", 20852163)
	s, _, vkey := newWitnessKey(t, "witness.example.com/w1", when)

	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 || parts[0] != "witness.example.com/w1" {
		t.Fatalf("vkey %q is not name+id+key", vkey)
	}
	raw, _ := base64.StdEncoding.DecodeString(parts[2])
	if len(raw) != 33 || raw[0] != 0x04 {
		t.Fatalf("vkey key material: %x, want 0x04 and 32 bytes", raw)
	}
	pub := ed25519.PublicKey(raw[1:])
	idInput := append([]byte("witness.example.com/w1\n\x04"), pub...)
	sum := sha256.Sum256(idInput)
	if want := fmt.Sprintf("%x", sum[:4]); parts[1] != want {
		t.Fatalf("key id %s, want %s", parts[1], want)
	}
	if _, err := note.NewVerifier(vkey); err == nil {
		t.Fatal("note.NewVerifier accepted a type 0x04 key; the custom verifier would be unneeded")
	}

	cosigned, err := note.Sign(&note.Note{Text: c.String()}, s)
	if err != nil {
		t.Fatal(err)
	}
	line := string(cosigned[len(c.String())+1:])
	b64, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "— witness.example.com/w1 ")
	if !ok {
		t.Fatalf("signature line %q", line)
	}
	sig, _ := base64.StdEncoding.DecodeString(b64)
	if len(sig) != 4+8+64 || !bytes.Equal(sig[:4], sum[:4]) {
		t.Fatalf("signature of %d bytes, key id %x", len(sig), sig[:4])
	}
	if ts := binary.BigEndian.Uint64(sig[4:12]); ts != 1679315147 {
		t.Fatalf("timestamp %d", ts)
	}
	msg := "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n" +
		base64.StdEncoding.EncodeToString(c.Hash[:]) + "\n"
	if !ed25519.Verify(pub, []byte(msg), sig[12:]) {
		t.Fatal("the Ed25519 signature is not over the cosignature/v1 message")
	}

	// The cosignature appended to the log's signed checkpoint: note.Open
	// verifies both with the log's and the witness's verifiers.
	v, _ := NewCosignatureVerifier(vkey)
	both := append(bytes.Clone(signed), line...)
	n, err := note.Open(both, note.VerifierList(logV, v))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("note.Open of the cosigned checkpoint: %v, %+v", err, n)
	}
	if _, err := OpenCheckpoint(both, logV); err != nil {
		t.Fatalf("the log's own check ignores the cosignature: %v", err)
	}
}

// TestCosignatureKeyWithPlus: a verifier key whose base64 holds "+" (the
// separator of its fields) parses: the name and key ID end at the first
// two. About half of all keys have one.
func TestCosignatureKeyWithPlus(t *testing.T) {
	for range 500 {
		skey, vkey, err := GenerateCosignerKey("w.example/plus")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.SplitN(vkey, "+", 3)[2], "+") {
			continue
		}
		s, err := NewCosigner(skey, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := NewCosignatureVerifier(vkey)
		if err != nil {
			t.Fatalf("%s: %v", vkey, err)
		}
		if got, _ := CosignerVerifierKey(s); got != vkey {
			t.Fatalf("CosignerVerifierKey %s, want %s", got, vkey)
		}
		sig, _ := s.Sign([]byte("text\n"))
		if !v.Verify([]byte("text\n"), sig) {
			t.Fatal("does not verify")
		}
		return
	}
	t.Fatal("no key of 500 had a plus sign in its base64")
}

// TestCosignatureVerifierRefuses: a cosignature of another checkpoint,
// another timestamp, a plain Ed25519 note signature (type 0x01) by the
// same key, or a timestamp above 2^63-1 does not verify; a verifier key
// of type 0x01 or with a wrong key ID is refused.
func TestCosignatureVerifierRefuses(t *testing.T) {
	_, _, c := testCheckpoint(t, "example.com/log", 5)
	s, v, vkey := newWitnessKey(t, "w.example/1", time.Unix(1700000000, 0))
	good, _ := s.Sign([]byte(c.String()))
	if !v.Verify([]byte(c.String()), good) {
		t.Fatal("a good cosignature does not verify")
	}
	other := c
	other.Size++
	tamperedTime := bytes.Clone(good)
	tamperedTime[7]++
	bigTime := bytes.Clone(good)
	bigTime[0] = 0x80
	for name, tc := range map[string]struct {
		msg, sig []byte
	}{
		"another checkpoint": {[]byte(other.String()), good},
		"another timestamp":  {[]byte(c.String()), tamperedTime},
		"timestamp >= 2^63":  {[]byte(c.String()), bigTime},
		"no timestamp":       {[]byte(c.String()), good[8:]},
		"empty":              {[]byte(c.String()), nil},
	} {
		if v.Verify(tc.msg, tc.sig) {
			t.Errorf("%s: verified", name)
		}
	}
	_, logVKey, _ := GenerateKey("w.example/1")
	if _, err := NewCosignatureVerifier(logVKey); !errors.Is(err, ErrFormat) {
		t.Errorf("a type 0x01 key as a witness key: %v", err)
	}
	parts := strings.SplitN(vkey, "+", 3)
	if _, err := NewCosignatureVerifier("w.example/2+" + parts[1] + "+" + parts[2]); !errors.Is(err, ErrFormat) {
		t.Errorf("a key id of another name: %v", err)
	}
}

// TestCheckCosignatures: k of n trusted witnesses, through note.Open.
func TestCheckCosignatures(t *testing.T) {
	signed, logV, c := testCheckpoint(t, "example.com/log", 42)
	now := time.Unix(1700000000, 0)
	var signers []note.Signer
	var verifiers []note.Verifier
	var vkeys []string
	for i := range 3 {
		s, v, k := newWitnessKey(t, fmt.Sprintf("w%d.example", i), now)
		signers, verifiers, vkeys = append(signers, s), append(verifiers, v), append(vkeys, k)
	}
	cosign := func(s note.Signer) string {
		b, err := note.Sign(&note.Note{Text: c.String()}, s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b[len(c.String())+1:])
	}
	twoOfThree := string(signed) + cosign(signers[0]) + cosign(signers[2])

	_, rep, err := CheckCosignatures([]byte(twoOfThree), logV, verifiers, 2)
	if err != nil || len(rep.Valid) != 2 || len(rep.Missing) != 1 || rep.Missing[0] != "w1.example" {
		t.Fatalf("2 of 3 with 2 required: %v %+v", err, rep)
	}
	if !rep.Valid[0].Time.Equal(now) {
		t.Fatalf("cosignature time %v, want %v", rep.Valid[0].Time, now)
	}
	if _, _, err := CheckCosignatures([]byte(twoOfThree), logV, verifiers, 3); !errors.Is(err, ErrWitness) || !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "w1.example") {
		t.Fatalf("2 of 3 with 3 required: %v", err)
	}
	// A witness's line that does not verify counts as none, and is named.
	line := strings.TrimSuffix(cosign(signers[2]), "\n")
	name, b64, _ := strings.Cut(strings.TrimPrefix(line, "— "), " ")
	sig, _ := base64.StdEncoding.DecodeString(b64)
	sig[40] ^= 1 // inside the Ed25519 signature
	bad := []byte(string(signed) + cosign(signers[0]) + "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n")
	if _, rep, err := CheckCosignatures(bad, logV, verifiers, 2); !errors.Is(err, ErrWitness) || len(rep.Invalid) != 1 || rep.Invalid[0] != "w2.example" {
		t.Fatalf("a tampered cosignature: %v %+v", err, rep)
	}
	// The same witness key given twice counts once.
	dup, _ := NewCosignatureVerifier(vkeys[0])
	if _, _, err := CheckCosignatures([]byte(string(signed)+cosign(signers[0])), logV, []note.Verifier{verifiers[0], dup}, 2); !errors.Is(err, ErrWitness) {
		t.Fatalf("one witness given twice counted twice: %v", err)
	}
	// A cosignature of the same tree size with another root is not one
	// of this checkpoint.
	other := c
	other.Hash[0] ^= 1
	ob, _ := note.Sign(&note.Note{Text: other.String()}, signers[1])
	if _, _, err := CheckCosignatures([]byte(twoOfThree+string(ob[len(other.String())+1:])), logV, verifiers, 3); !errors.Is(err, ErrWitness) {
		t.Fatalf("a cosignature of another root counted: %v", err)
	}
	// Without the log's signature nothing counts.
	_, otherLog, _ := testCheckpoint(t, "example.com/log", 42)
	if _, _, err := CheckCosignatures([]byte(twoOfThree), otherLog, verifiers, 1); !errors.Is(err, ErrVerify) || errors.Is(err, ErrWitness) {
		t.Fatalf("another log key: %v", err)
	}
}
