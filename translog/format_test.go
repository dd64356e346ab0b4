package translog_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/translog"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	goldenProof = "testdata/entry3-of-10.tlog-proof"
	goldenEntry = "testdata/entry3-of-10.entry"
)

// goldenLog is the log of the golden proof: ten fixed entries signed by
// the fixed test key, so the proof (Ed25519 signatures included) is the
// same on every run.
func goldenLog(t testing.TB) *translog.Log {
	t.Helper()
	db, l := newLog(t)
	appendTx(t, db, l, entries(0, 10)...)
	return l
}

func TestGoldenProof(t *testing.T) {
	got := mustProve(t, goldenLog(t), 3, 0)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenProof, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenEntry, entry(3), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenProof)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("proof differs from %s:\n got:\n%s\nwant:\n%s", goldenProof, got, want)
	}
	e, err := os.ReadFile(goldenEntry)
	if err != nil {
		t.Fatal(err)
	}
	c, err := translog.CheckProof(want, e, testVerifier(t, testVkey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != 10 || c.Origin != testOrigin {
		t.Errorf("golden checkpoint %v", c)
	}
}

func TestParseCheckpoint(t *testing.T) {
	root := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	for _, ok := range []string{
		"example.com/log\n0\n" + root + "\n",
		"example.com/log\n18446744\n" + root + "\n",
		"o\n1\n" + root + "\next one\next two\n",
	} {
		c, err := translog.ParseCheckpoint([]byte(ok))
		if err != nil || c.String() != ok {
			t.Errorf("ParseCheckpoint(%q) = %+v, %v", ok, c, err)
		}
	}
	for _, bad := range []string{
		"", "example.com/log\n1\n" + root, "\n1\n" + root + "\n", "o\n01\n" + root + "\n", "o\n-1\n" + root + "\n",
		"o\n+1\n" + root + "\n", "o\n1\n" + root[:len(root)-1] + "\n", "o\n1\n" + root + "=\n",
		"o\n1\n47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=\n", "o\n1\n\n", "o\n1\n" + root + "\n\n",
		"o\n1\n" + root + "\next\n\n", "o\n99999999999999999999\n" + root + "\n", "o\n1\n",
		"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=\n", // non-zero padding bits
	} {
		if _, err := translog.ParseCheckpoint([]byte(bad)); !errors.Is(err, translog.ErrFormat) {
			t.Errorf("ParseCheckpoint(%q): %v, want ErrFormat", bad, err)
		}
	}
}

func TestProofRoundTrip(t *testing.T) {
	l := goldenLog(t)
	p, err := translog.ParseProof(mustProve(t, l, 3, 0))
	if err != nil {
		t.Fatal(err)
	}
	p.Extra = []byte("shredd attestation sha256:…")
	text := p.Marshal()
	q, err := translog.ParseProof(text)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.Marshal(), text) || !bytes.Equal(q.Extra, p.Extra) || q.Index != 3 || len(q.Hashes) != 4 {
		t.Errorf("round trip with extra: %+v", q)
	}
	// Extra is not authenticated: the proof still checks.
	if _, err := translog.CheckProof(text, entry(3), testVerifier(t, testVkey)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{
		"", "c2sp.org/tlog-proof@v1\n", "c2sp.org/tlog-proof@v1\nindex 1\n",
		"c2sp.org/tlog-proof@v1\nextra \nindex 1\n\n",
		"c2sp.org/tlog-proof@v1\nindex 01\n\n",
		"c2sp.org/tlog-proof@v1\nindex 1\nAAAA\n\n",
	} {
		if _, err := translog.ParseProof([]byte(bad)); !errors.Is(err, translog.ErrFormat) {
			t.Errorf("ParseProof(%q): %v, want ErrFormat", bad, err)
		}
	}
}

func TestConsistencyProofText(t *testing.T) {
	h := tlog.RecordHash([]byte("x"))
	p := &translog.ConsistencyProof{Old: 3, New: 7, Hashes: tlog.TreeProof{h, h}}
	want := "shredd/tlog-consistency@v1\nold 3\nnew 7\n" + h.String() + "\n" + h.String() + "\n"
	if got := string(p.Marshal()); got != want {
		t.Errorf("Marshal = %q, want %q", got, want)
	}
	for _, bad := range []string{
		"", "shredd/tlog-consistency@v1\nold 3\nnew 7", "shredd/tlog-consistency@v1\nold 8\nnew 7\n",
		"shredd/tlog-consistency@v1\nnew 7\nold 3\n", "shredd/tlog-consistency@v1\nold 3\nnew 7\n\n",
		"shredd/tlog-consistency@v2\nold 3\nnew 7\n", "shredd/tlog-consistency@v1\nold 3\nnew 7\nAAAA\n",
	} {
		if _, err := translog.ParseConsistencyProof([]byte(bad)); !errors.Is(err, translog.ErrFormat) {
			t.Errorf("ParseConsistencyProof(%q): %v, want ErrFormat", bad, err)
		}
	}
}

// seedProofs returns real proofs: the golden one and a few from a fresh
// log, with and without extra data.
func seedProofs(f *testing.F) [][]byte {
	var seeds [][]byte
	if golden, err := os.ReadFile(goldenProof); err == nil {
		seeds = append(seeds, golden)
	}
	db, l := newLog(f)
	appendTx(f, db, l, entries(0, 21)...)
	for _, i := range []int64{0, 7, 20} {
		proof := mustProve(f, l, i, 0)
		seeds = append(seeds, proof)
		p, _ := translog.ParseProof(proof)
		p.Extra = []byte{0, 1, 2}
		seeds = append(seeds, p.Marshal())
	}
	seeds = append(seeds, mustProve(f, l, 0, 1))
	return seeds
}

// roundTrip is the body of the parsers' fuzz targets: an input parse
// refuses is refused with ErrFormat, and one it takes is written back by
// write exactly as it was read.
func roundTrip[In string | []byte, T any](t *testing.T, in In, parse func(In) (T, error), write func(T) In) {
	t.Helper()
	v, err := parse(in)
	if err != nil {
		if !errors.Is(err, translog.ErrFormat) {
			t.Fatalf("error not wrapping ErrFormat: %v", err)
		}
		return
	}
	if got := write(v); string(got) != string(in) {
		t.Fatalf("parse then write:\n%q\nwant\n%q", got, in)
	}
}

func FuzzParseProof(f *testing.F) {
	for _, s := range seedProofs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, translog.ParseProof, (*translog.Proof).Marshal)
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	for _, s := range seedProofs(f) {
		p, _ := translog.ParseProof(s)
		f.Add(p.Checkpoint[:bytes.Index(p.Checkpoint, []byte("\n\n"))+1])
	}
	f.Add([]byte("o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		roundTrip(t, text, translog.ParseCheckpoint, func(c translog.Checkpoint) []byte { return []byte(c.String()) })
	})
}

func FuzzParseConsistencyProof(f *testing.F) {
	db, l := newLog(f)
	appendTx(f, db, l, entries(0, 40)...)
	for _, sizes := range [][2]int64{{0, 40}, {1, 40}, {13, 40}, {32, 33}, {40, 40}} {
		proof, err := l.ProveConsistency(context.Background(), sizes[0], sizes[1])
		if err != nil {
			f.Fatal(err)
		}
		f.Add((&translog.ConsistencyProof{Old: sizes[0], New: sizes[1], Hashes: proof}).Marshal())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, translog.ParseConsistencyProof, (*translog.ConsistencyProof).Marshal)
	})
}

func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{"tile/0/000", "tile/0/x001/x234/067", "tile/2/x001/000.p/1", "tile/entries/005.p/255", "tile/63/999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		roundTrip(t, path, translog.ParseTilePath, translog.TilePath)
	})
}
