package translog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/translog"
)

// caught reports whether err is one of the two errors a verifier may
// return for a tampered input.
func caught(err error) bool {
	return errors.Is(err, translog.ErrVerify) || errors.Is(err, translog.ErrFormat)
}

// flipBase64 changes one character of the base64 text s at i into
// another base64 character, so that the text still decodes.
func flipBase64(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestTamperedProofsFail(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	all := entries(0, 37)
	appendTx(t, db, l, all...)
	v := testVerifier(t, testVkey)
	const idx = 12
	proof, err := l.Prove(ctx, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := translog.CheckProof(proof, all[idx], v); err != nil {
		t.Fatalf("untampered proof: %v", err)
	}
	lines := strings.Split(string(proof), "\n")
	// lines: 0 header, 1 index, 2..7 hashes (37 leaves: 6 levels), 8 "",
	// 9 origin, 10 size, 11 root, 12 "", 13 signature, 14 "".
	if len(lines) != 15 || lines[8] != "" || lines[12] != "" {
		t.Fatalf("unexpected proof layout:\n%s", proof)
	}
	edit := func(f func(ls []string) []string) []byte {
		ls := f(append([]string(nil), lines...))
		return []byte(strings.Join(ls, "\n"))
	}
	// A checkpoint signed by the log's key whose origin is another one.
	signer := testSigner(t, testSkey)
	forged, err := note.Sign(&note.Note{Text: "example.com/evil\n37\n" + lines[11] + "\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	sigFlipped := []byte(nil)
	{
		sig := lines[13]
		i := strings.LastIndexByte(sig, ' ') + 10
		sigFlipped = edit(func(ls []string) []string { ls[13] = flipBase64(sig, i); return ls })
	}
	for _, tc := range []struct {
		name  string
		proof []byte
		entry []byte
		v     note.Verifier
	}{
		{"entry byte flipped", proof, append([]byte{all[idx][0] ^ 1}, all[idx][1:]...), v},
		{"entry of another index", proof, all[idx+1], v},
		{"proof hash flipped", edit(func(ls []string) []string { ls[4] = flipBase64(ls[4], 3); return ls }), all[idx], v},
		{"proof hash line dropped", edit(func(ls []string) []string { return append(ls[:4], ls[5:]...) }), all[idx], v},
		{"proof hash line added", edit(func(ls []string) []string { return append(ls[:4], append([]string{ls[4]}, ls[4:]...)...) }), all[idx], v},
		{"proof hashes swapped", edit(func(ls []string) []string { ls[3], ls[4] = ls[4], ls[3]; return ls }), all[idx], v},
		{"index changed", edit(func(ls []string) []string { ls[1] = "index 13"; return ls }), all[idx], v},
		{"index beyond tree", edit(func(ls []string) []string { ls[1] = "index 37"; return ls }), all[idx], v},
		{"root hash flipped", edit(func(ls []string) []string { ls[11] = flipBase64(ls[11], 5); return ls }), all[idx], v},
		{"tree size changed", edit(func(ls []string) []string { ls[10] = "38"; return ls }), all[idx], v},
		{"origin changed", edit(func(ls []string) []string { ls[9] = "example.com/shredd-test-log2"; return ls }), all[idx], v},
		{"signature flipped", sigFlipped, all[idx], v},
		{"signature removed", edit(func(ls []string) []string { return append(ls[:13], "") }), all[idx], v},
		{"signature line garbled", edit(func(ls []string) []string { ls[13] = "— " + testOrigin + " !!!"; return ls }), all[idx], v},
		{"signed by the log's key with another origin", append(append([]byte{}, proof[:bytes.Index(proof, []byte("\n\n"))+2]...), forged...), all[idx], v},
		{"checked with another log's key", proof, all[idx], testVerifier(t, otherVkey)},
		{"header changed", edit(func(ls []string) []string { ls[0] = "c2sp.org/tlog-proof@v2"; return ls }), all[idx], v},
		{"blank line dropped", edit(func(ls []string) []string { return append(ls[:8], ls[9:]...) }), all[idx], v},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := translog.CheckProof(tc.proof, tc.entry, tc.v); !caught(err) {
				t.Errorf("CheckProof accepted it or failed otherwise: %v\n%s", err, tc.proof)
			}
		})
	}
}

// TestSwappedEntriesFail swaps two entries of a log: the proofs of the
// original log do not hold for the swapped entries, and the swapped log's
// checkpoint is not consistent with the original's.
func TestSwappedEntriesFail(t *testing.T) {
	ctx := context.Background()
	v := testVerifier(t, testVkey)
	all := entries(0, 20)
	db, l := newLog(t)
	appendTx(t, db, l, all...)
	swapped := append([][]byte(nil), all...)
	swapped[4], swapped[9] = swapped[9], swapped[4]
	db2, l2 := newLog(t)
	appendTx(t, db2, l2, swapped...)
	for _, i := range []int64{4, 9} {
		proof, err := l.Prove(ctx, i, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := translog.CheckProof(proof, swapped[i], v); !caught(err) {
			t.Errorf("proof of %d accepted the swapped entry: %v", i, err)
		}
	}
	a, _ := translog.OpenCheckpoint(mustCheckpoint(t, l), v)
	b, _ := translog.OpenCheckpoint(mustCheckpoint(t, l2), v)
	if err := translog.CheckConsistency(a, b, nil); !errors.Is(err, translog.ErrVerify) {
		t.Errorf("two trees of size 20 with swapped entries deemed consistent: %v", err)
	}
}

// TestForkDetected forks a log: a second log signed by the same key holds
// the same entries but one. Its checkpoints, signed and valid on their
// own, fail consistency with the first log's.
func TestForkDetected(t *testing.T) {
	ctx := context.Background()
	v := testVerifier(t, testVkey)
	const n, forkAt = 100, 57
	all := entries(0, n)
	fork := append([][]byte(nil), all...)
	fork[forkAt] = []byte("a different entry 57")
	db, l := newLog(t)
	dbf, lf := newLog(t)
	appendTx(t, db, l, all[:60]...)
	appendTx(t, dbf, lf, fork[:60]...)
	honest60, err := translog.OpenCheckpoint(mustCheckpoint(t, l), v)
	if err != nil {
		t.Fatal(err)
	}
	appendTx(t, db, l, all[60:]...)
	appendTx(t, dbf, lf, fork[60:]...)
	honest, _ := translog.OpenCheckpoint(mustCheckpoint(t, l), v)
	forked, err := translog.OpenCheckpoint(mustCheckpoint(t, lf), v)
	if err != nil {
		t.Fatalf("the fork's checkpoint is validly signed: %v", err)
	}
	// The fork's own consistency proof from the honest old checkpoint.
	for _, old := range []int64{forkAt + 1, 60, 64, 99} {
		oldCp := honest60
		if old != 60 {
			proof, err := l.Prove(ctx, 0, old)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := translog.ParseProof(proof)
			if oldCp, err = translog.OpenCheckpoint(p.Checkpoint, v); err != nil {
				t.Fatal(err)
			}
		}
		proof, err := lf.ProveConsistency(ctx, old, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := translog.CheckConsistency(oldCp, forked, proof); !errors.Is(err, translog.ErrVerify) {
			t.Errorf("fork of size %d consistent with honest tree %d: %v", n, old, err)
		}
		// The honest log's proof does not bridge to the fork either.
		proof, err = l.ProveConsistency(ctx, old, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := translog.CheckConsistency(oldCp, honest, proof); err != nil {
			t.Fatalf("honest consistency %d..%d: %v", old, n, err)
		}
		if err := translog.CheckConsistency(oldCp, forked, proof); !errors.Is(err, translog.ErrVerify) {
			t.Errorf("honest proof accepted for the fork: %v", err)
		}
	}
	// Before the fork point the two trees agree, as they should.
	proof, err := lf.ProveConsistency(ctx, forkAt, n)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := translog.ParseProof(mustProve(t, l, 0, forkAt))
	before, _ := translog.OpenCheckpoint(p.Checkpoint, v)
	if err := translog.CheckConsistency(before, forked, proof); err != nil {
		t.Errorf("trees agree up to %d: %v", forkAt, err)
	}
	// An inclusion proof from the fork does not prove the honest entry.
	if _, err := translog.CheckProof(mustProve(t, lf, forkAt, 0), all[forkAt], v); !caught(err) {
		t.Errorf("fork's proof accepted the honest entry: %v", err)
	}
}

func mustProve(t testing.TB, l *translog.Log, index, size int64) []byte {
	t.Helper()
	p, err := l.Prove(context.Background(), index, size)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenCheckpointErrors(t *testing.T) {
	_, l := newLog(t)
	cp := mustCheckpoint(t, l)
	v := testVerifier(t, testVkey)
	if _, err := translog.OpenCheckpoint(cp, testVerifier(t, otherVkey)); !errors.Is(err, translog.ErrVerify) {
		t.Errorf("another key: %v, want ErrVerify", err)
	}
	if _, err := translog.OpenCheckpoint([]byte("not a note"), v); !errors.Is(err, translog.ErrFormat) {
		t.Errorf("not a note: %v, want ErrFormat", err)
	}
	// A note signed by the right key whose text is not a checkpoint.
	signed, err := note.Sign(&note.Note{Text: "example.com/shredd-test-log\n01\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"}, testSigner(t, testSkey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := translog.OpenCheckpoint(signed, v); !errors.Is(err, translog.ErrFormat) {
		t.Errorf("signed non-checkpoint: %v, want ErrFormat", err)
	}
}
