package witness_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/translog"
	"github.com/shredd/shredd/witness"
)

// testLog is a transparency log in a real SQLite file.
type testLog struct {
	db *storage.DB
	l  *translog.Log
	n  int
}

func newTestLog(t *testing.T, skey string) *testLog {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := translog.Open(context.Background(), db, s)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{db: db, l: l}
}

// grow appends k entries whose text starts with tag.
func (tl *testLog) grow(t *testing.T, tag string, k int) {
	t.Helper()
	ctx := context.Background()
	tx, err := tl.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for range k {
		tl.n++
		if _, err := tl.l.Append(ctx, tx, fmt.Appendf(nil, "%s entry %d", tag, tl.n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func (tl *testLog) checkpoint(t *testing.T) []byte {
	t.Helper()
	cp, err := tl.l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// testWitness is a Witness served over HTTP on 127.0.0.1.
type testWitness struct {
	w    *witness.Witness
	srv  *httptest.Server
	skey string
	vkey string
	dir  string
	key  note.Verifier
}

func startWitness(t *testing.T, name, skey, vkey, dir string, logs ...string) *testWitness {
	t.Helper()
	if skey == "" {
		var err error
		if skey, vkey, err = translog.GenerateCosignerKey(name); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := translog.NewCosigner(skey, nil)
	if err != nil {
		t.Fatal(err)
	}
	var vs []note.Verifier
	for _, l := range logs {
		v, err := note.NewVerifier(l)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	w, err := witness.New(witness.Config{Cosigner: cs, Logs: vs, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	key, err := translog.NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &testWitness{w: w, srv: srv, skey: skey, vkey: vkey, dir: dir, key: key}
}

func (tw *testWitness) target() witness.Target { return witness.Target{URL: tw.srv.URL, Key: tw.key} }

// post sends an add-checkpoint body and returns the status and the answer.
func (tw *testWitness) post(t *testing.T, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(tw.srv.URL+"/add-checkpoint", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func cosigned(t *testing.T, cp []byte, log string, ws ...*testWitness) int {
	t.Helper()
	lv, _ := note.NewVerifier(log)
	var keys []note.Verifier
	for _, w := range ws {
		keys = append(keys, w.key)
	}
	_, rep, _ := translog.CheckCosignatures(cp, lv, keys, 0)
	if rep == nil {
		t.Fatalf("checkpoint does not open with the log key:\n%s", cp)
	}
	return len(rep.Valid)
}

func evidence(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "evidence"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestSenderGrowingLog: two witnesses cosign a growing log through the
// sender; each new checkpoint carries both cosignatures (verified with
// note.Open through translog.CheckCosignatures), and the second round is
// sent with a consistency proof from the tree the witness holds.
func TestSenderGrowingLog(t *testing.T) {
	skey, vkey, _ := translog.GenerateKey("example.com/growing")
	tl := newTestLog(t, skey)
	w1 := startWitness(t, "w1.example", "", "", t.TempDir(), vkey)
	w2 := startWitness(t, "w2.example", "", "", t.TempDir(), vkey)
	s := witness.NewSender(tl.l, []witness.Target{w1.target(), w2.target()}, time.Second, nil)
	ctx := context.Background()
	for round, k := range []int{3, 1, 17, 256} {
		tl.grow(t, "a", k)
		if n := cosigned(t, tl.checkpoint(t), vkey, w1, w2); n != 0 {
			t.Fatalf("round %d: %d cosignatures before the sender ran", round, n)
		}
		s.Round(ctx)
		cp := tl.checkpoint(t)
		if n := cosigned(t, cp, vkey, w1, w2); n != 2 {
			t.Fatalf("round %d: %d cosignatures, want 2:\n%s", round, n, cp)
		}
		c, _ := w1.w.Latest("example.com/growing")
		if c.Size != int64(tl.n) {
			t.Fatalf("round %d: witness holds size %d, want %d", round, c.Size, tl.n)
		}
	}
	// A restarted sender (no memory) learns the witness's size from its
	// 409 and gets a fresh cosignature of the same tree.
	fresh := witness.NewSender(tl.l, []witness.Target{w1.target()}, time.Second, nil)
	tl.grow(t, "a", 2)
	fresh.Round(ctx)
	if n := cosigned(t, tl.checkpoint(t), vkey, w1); n != 1 {
		t.Fatalf("after a sender restart: %d cosignatures", n)
	}
}

// TestSplitView: two logs under one key (a forked log) grow to the same
// size with different roots. A witness that cosigned one refuses the
// other (409, not a size answer), keeps both as evidence (once), and its state
// stays; the forked log's checkpoint carries no cosignature. A fork of
// another size gets 422 (the proof does not lead from the tree held).
func TestSplitView(t *testing.T) {
	skey, vkey, _ := translog.GenerateKey("example.com/forked")
	a, b := newTestLog(t, skey), newTestLog(t, skey)
	w := startWitness(t, "w.example", "", "", t.TempDir(), vkey)
	ctx := context.Background()
	a.grow(t, "a", 5)
	witness.NewSender(a.l, []witness.Target{w.target()}, time.Second, nil).Round(ctx)
	if cosigned(t, a.checkpoint(t), vkey, w) != 1 {
		t.Fatal("log a not cosigned")
	}
	b.grow(t, "b", 5)
	witness.NewSender(b.l, []witness.Target{w.target()}, time.Second, nil).Round(ctx)
	if n := cosigned(t, b.checkpoint(t), vkey, w); n != 0 {
		t.Fatalf("the fork of the same size got %d cosignatures", n)
	}
	// The raw answer: 409 without the size media type.
	status, ctype, _ := w.post(t, "old 5\n\n"+string(b.checkpoint(t)))
	if status != http.StatusConflict || ctype == witness.SizeContentType {
		t.Fatalf("split view: %d %s", status, ctype)
	}
	ev := evidence(t, w.dir)
	if len(ev) != 1 || !strings.Contains(ev[0], "5-split-view-") { // the same request twice: one file
		t.Fatalf("evidence files: %v", ev)
	}
	data, _ := os.ReadFile(filepath.Join(w.dir, "evidence", ev[0]))
	if !bytes.Contains(data, a.checkpoint(t)[:40]) || !bytes.Contains(data, b.checkpoint(t)[:40]) {
		t.Fatalf("the evidence does not hold both checkpoints:\n%s", data)
	}
	c, _ := w.w.Latest("example.com/forked")
	ca, _ := translog.ParseCheckpoint([]byte(strings.SplitN(string(a.checkpoint(t)), "\n\n", 2)[0] + "\n"))
	if c != ca {
		t.Fatalf("the witness's state moved to %+v", c)
	}
	// The fork grows: its proof from 5 cannot lead from a's tree.
	b.grow(t, "b", 3)
	proof, _ := b.l.ProveConsistency(ctx, 5, 8)
	var body strings.Builder
	body.WriteString("old 5\n")
	for _, h := range proof {
		body.WriteString(h.String() + "\n")
	}
	body.WriteString("\n")
	body.Write(b.checkpoint(t))
	if status, _, _ := w.post(t, body.String()); status != http.StatusUnprocessableEntity {
		t.Fatalf("a fork with a proof from another tree: %d, want 422", status)
	}
	// a goes on and is cosigned.
	a.grow(t, "a", 3)
	witness.NewSender(a.l, []witness.Target{w.target()}, time.Second, nil).Round(ctx)
	if cosigned(t, a.checkpoint(t), vkey, w) != 1 {
		t.Fatal("log a not cosigned after the refused fork")
	}
}

// TestWitnessRestartNeverGoesBack: a witness restarted on its state
// directory answers its size (409, text/x.tlog.size) to a log starting
// over, refuses a smaller tree (400 and 409), and goes on from where it
// was.
func TestWitnessRestartNeverGoesBack(t *testing.T) {
	skey, vkey, _ := translog.GenerateKey("example.com/restart")
	tl := newTestLog(t, skey)
	dir := t.TempDir()
	w := startWitness(t, "w.example", "", "", dir, vkey)
	tl.grow(t, "x", 4)
	old := tl.checkpoint(t)
	witness.NewSender(tl.l, []witness.Target{w.target()}, time.Second, nil).Round(context.Background())
	tl.grow(t, "x", 6)
	witness.NewSender(tl.l, []witness.Target{w.target()}, time.Second, nil).Round(context.Background())
	w.srv.Close()

	w = startWitness(t, "w.example", w.skey, w.vkey, dir, vkey)
	for _, tc := range []struct {
		body   string
		status int
		answer string
	}{
		{"old 0\n\n" + string(old), http.StatusConflict, "10\n"},
		{"old 4\n\n" + string(old), http.StatusConflict, "10\n"},
		{"old 10\n\n" + string(old), http.StatusBadRequest, ""},
	} {
		status, ctype, answer := w.post(t, tc.body)
		if status != tc.status || (tc.answer != "" && (answer != tc.answer || ctype != witness.SizeContentType)) {
			t.Fatalf("%q: %d %s %q, want %d %q", tc.body[:6], status, ctype, answer, tc.status, tc.answer)
		}
	}
	tl.grow(t, "x", 1)
	witness.NewSender(tl.l, []witness.Target{w.target()}, time.Second, nil).Round(context.Background())
	if cosigned(t, tl.checkpoint(t), vkey, w) != 1 {
		t.Fatal("not cosigned after the witness's restart")
	}
	if c, _ := w.w.Latest("example.com/restart"); c.Size != 11 {
		t.Fatalf("restarted witness holds %d", c.Size)
	}
}

// TestAddCheckpointRefusals: the statuses of C2SP tlog-witness for a bad
// request: unknown origin 404, no valid log signature 403, old above the
// checkpoint's size 400, malformed 400, a proof from size 0 422.
func TestAddCheckpointRefusals(t *testing.T) {
	skey, vkey, _ := translog.GenerateKey("example.com/known")
	tl := newTestLog(t, skey)
	w := startWitness(t, "w.example", "", "", t.TempDir(), vkey)
	tl.grow(t, "k", 3)
	cp := string(tl.checkpoint(t))
	otherSkey, _, _ := translog.GenerateKey("example.com/known")
	forged := string(newTestLogGrown(t, otherSkey, 3))
	unknownSkey, _, _ := translog.GenerateKey("example.com/unknown")
	unknown := string(newTestLogGrown(t, unknownSkey, 3))
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"unknown origin", "old 0\n\n" + unknown, http.StatusNotFound},
		{"signed by another key", "old 0\n\n" + forged, http.StatusForbidden},
		{"old above size", "old 4\n\n" + cp, http.StatusBadRequest},
		{"no old line", "\n" + cp, http.StatusBadRequest},
		{"leading zero", "old 00\n\n" + cp, http.StatusBadRequest},
		{"not a hash", "old 0\nxyz\n\n" + cp, http.StatusBadRequest},
		{"proof from 0", "old 0\n" + strings.Repeat("A", 43) + "=\n\n" + cp, http.StatusUnprocessableEntity},
	} {
		if status, _, answer := w.post(t, tc.body); status != tc.status {
			t.Errorf("%s: %d %q, want %d", tc.name, status, answer, tc.status)
		}
	}
	if _, ok := w.w.Latest("example.com/known"); ok {
		t.Fatal("a refused request changed the state")
	}
	if status, _, answer := w.post(t, "old 0\n\n"+cp); status != http.StatusOK || !strings.HasPrefix(answer, "— w.example ") {
		t.Fatalf("a good request: %d %q", status, answer)
	}
}

func newTestLogGrown(t *testing.T, skey string, k int) []byte {
	tl := newTestLog(t, skey)
	tl.grow(t, "o", k)
	return tl.checkpoint(t)
}
