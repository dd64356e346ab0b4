package erasure_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/sealing"
	"github.com/shredd/shredd/testkit/shreddtest"
)

const slot = "0123456789abcdef"

var ledgerKey = ledger.LinesKey(bytes.Repeat([]byte{1}, 32))

func openLedger(t *testing.T, path string, opts ledger.Options) *ledger.Lines {
	t.Helper()
	l, err := ledger.OpenLines(path, ledgerKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// service is a service on b's database, key tree and root, with ledger l:
// the same data directory started again with another ledger file. close
// stops its background writers.
func service(t *testing.T, b *shreddtest.Stack, l *ledger.Lines) (svc *shreddtest.Service, close func()) {
	t.Helper()
	reg, err := registry.Open(context.Background(), b.DB, b.Keys, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := erasure.New(b.DB, reg, b.Keys, b.Hasher, erasure.Options{Ledger: l})
	return &shreddtest.Service{Sealer: sealing.New(reg, b.Keys, b.Hasher, sealing.Options{}),
		Eraser: e, Holders: erasure.NewHolders(e), Evidence: erasure.NewEvidence(e), Registry: reg}, reg.Close
}

// ledgerWorld is a stack whose ledger holds the forgets of alice, bob and
// carol, its head kept with the root.
type ledgerWorld struct {
	b    *shreddtest.Stack
	root keystore.RootStore
	raw  []byte
	head ledger.Head
	ids  []shredd.ID
}

func newLedgerWorld(t *testing.T) *ledgerWorld {
	t.Helper()
	ctx := context.Background()
	root, err := local.Open(filepath.Join(t.TempDir(), "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	l := openLedger(t, path, ledger.Options{})
	w := &ledgerWorld{root: root}
	w.b = shreddtest.New(t, shreddtest.Options{Root: root, Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	if _, err := w.b.Eraser.Recovery().ReconcileLedger(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"alice", "bob", "carol"} {
		if _, err := w.b.Service.Encrypt(ctx, shredd.Source{Subjects: []string{s}, Kind: "episodic"}, []byte("hi"), nil); err != nil {
			t.Fatal(err)
		}
		f, err := w.b.Service.Forget(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		w.ids = append(w.ids, f.ID)
	}
	if err := w.b.Eraser.Recovery().KeepLedgerHead(ctx); err != nil {
		t.Fatal(err)
	}
	if found, err := ledger.ReadHead(ctx, root, erasure.HeadStream, &w.head); err != nil || !found || w.head.Seq != 3 || w.head.Lines != 3 {
		t.Fatalf("head kept with the root: %+v, %v", w.head, err)
	}
	l.Close()
	if w.raw, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(w.raw, []byte("alice")) {
		t.Fatal("the ledger names the raw subject id")
	}
	return w
}

// reconcile starts db's service on a ledger file holding b, with the
// world's head kept with the root.
func (w *ledgerWorld) reconcile(t *testing.T, db *shreddtest.Stack, b []byte, opts ledger.Options) (*ledger.Lines, erasure.LedgerReport, error) {
	t.Helper()
	ctx := context.Background()
	var h ledger.Head
	if found, err := ledger.ReadHead(ctx, w.root, erasure.HeadStream, &h); err != nil || !found || h != w.head {
		if err := ledger.KeepHead(ctx, w.root, erasure.HeadStream, w.head); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, path, opts)
	svc, done := service(t, db, l)
	defer done()
	rep, err := svc.Recovery().ReconcileLedger(ctx)
	return l, rep, err
}

// TestLedgerTruncatedAtEveryOffset: the ledger cut at every byte offset is
// never a silent loss. With the database that holds the forgets, every
// start repairs the ledger (reported) and it holds every forget again;
// with a database restored from before the forgets, every start is
// refused and changes nothing.
func TestLedgerTruncatedAtEveryOffset(t *testing.T) {
	w := newLedgerWorld(t)
	older := shreddtest.New(t, shreddtest.Options{Root: w.root, Kinds: []string{"episodic"}})
	for o := 0; o < len(w.raw); o++ {
		l, rep, err := w.reconcile(t, w.b, w.raw[:o], ledger.Options{})
		if err != nil || rep.Repaired == nil || rep.Repaired.Loss() {
			t.Fatalf("cut at %d of %d, the database holding every forget: %+v, %v; want a repair that loses nothing", o, len(w.raw), rep, err)
		}
		for _, id := range w.ids {
			if !l.Has(id) {
				t.Fatalf("cut at %d: forget %s is not in the repaired ledger", o, id)
			}
		}
		if h, _ := l.Head(); h.Lines != 3 {
			t.Fatalf("cut at %d: the repaired ledger holds %d lines, want 3", o, h.Lines)
		}
		l.Close()
		if o%97 != 0 {
			continue // the refusals below read the whole file; every 97th is plenty to also reopen
		}
		if again := openLedger(t, l.Path(), ledger.Options{}); again.Len() != 3 {
			t.Fatalf("cut at %d: the repaired ledger reopens with %d forgets", o, again.Len())
		}
	}
	for o := 0; o < len(w.raw)-1; o++ {
		l, rep, err := w.reconcile(t, older, w.raw[:o], ledger.Options{})
		if !errors.Is(err, shredd.ErrLedger) || !strings.Contains(err.Error(), "shredd ledger check") || !strings.Contains(err.Error(), "--accept-loss") {
			t.Fatalf("cut at %d of %d, an older database: %+v, %v; want a refusal naming shredd ledger check and repair", o, len(w.raw), rep, err)
		}
		if got, _ := os.ReadFile(l.Path()); !bytes.Equal(got, w.raw[:o]) {
			t.Fatalf("cut at %d: the refused start changed the ledger", o)
		}
		l.Close()
	}
	// The older database is as it was: the refused starts committed nothing.
	fs, err := older.Service.Forgets(context.Background(), "", 10)
	if err != nil || len(fs) != 0 {
		t.Fatalf("the older database after the refused starts: %d forgets, %v", len(fs), err)
	}
	// Cut before the last newline only: the last line is whole and
	// authentic, so its forget is committed again from it, like the others.
	l, rep, err := w.reconcile(t, older, w.raw[:len(w.raw)-1], ledger.Options{})
	if err != nil || rep.Repaired == nil || rep.Repaired.Loss() || rep.Reapplied != 3 || l.Len() != 3 {
		t.Fatalf("cut before the last newline, an older database: %+v, %v", rep, err)
	}
	if _, err := older.Service.Encrypt(context.Background(), shredd.Source{Subjects: []string{"carol"}, Kind: "episodic"}, []byte("back"), nil); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("encrypt for carol after the repair: %v, want ErrShredded", err)
	}
}

// TestLedgerDamage: an altered middle line, reordered lines, a torn last
// line with and without its forget in the database, a ledger cut at a
// line's end (seen only through the head kept with the root), and an
// accepted loss.
func TestLedgerDamage(t *testing.T) {
	ctx := context.Background()
	w := newLedgerWorld(t)
	lines := bytes.SplitAfter(w.raw, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header and 3", len(lines))
	}
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	altered := bytes.Replace(lines[2], []byte(`"gen":`), []byte(`"gen":9`), 1)
	fresh := func() *shreddtest.Stack {
		return shreddtest.New(t, shreddtest.Options{Root: w.root, Kinds: []string{"episodic"}})
	}

	t.Run("altered middle line, database holds it", func(t *testing.T) {
		l, rep, err := w.reconcile(t, w.b, join(lines[0], lines[1], altered, lines[3]), ledger.Options{})
		if err != nil || rep.Repaired == nil || len(rep.Repaired.Damaged) != 2 || rep.Repaired.Damaged[0].Authentic || !rep.Repaired.Damaged[1].Authentic || l.Len() != 3 {
			t.Fatalf("%+v, %v", rep.Repaired, err)
		}
		if _, err := os.Stat(rep.DamagedFile); err != nil {
			t.Fatalf("the damaged tail was not kept: %v", err)
		}
	})
	t.Run("altered middle line, older database", func(t *testing.T) {
		_, rep, err := w.reconcile(t, fresh(), join(lines[0], lines[1], altered, lines[3]), ledger.Options{})
		if !errors.Is(err, shredd.ErrLedger) {
			t.Fatalf("%+v, %v; want refused", rep, err)
		}
	})
	t.Run("reordered lines, older database", func(t *testing.T) {
		// Every line is authentic: nothing is lost, the forgets are
		// committed again from them and the chain rewritten.
		db := fresh()
		l, rep, err := w.reconcile(t, db, join(lines[0], lines[1], lines[3], lines[2]), ledger.Options{})
		if err != nil || rep.Repaired == nil || rep.Repaired.Reapply != 2 || rep.Reapplied != 3 || l.Len() != 3 {
			t.Fatalf("%+v %+v, %v", rep, rep.Repaired, err)
		}
		for _, s := range []string{"alice", "bob", "carol"} {
			if _, err := db.Service.Encrypt(ctx, shredd.Source{Subjects: []string{s}, Kind: "episodic"}, []byte("back"), nil); !errors.Is(err, shredd.ErrShredded) {
				t.Fatalf("encrypt for %s: %v, want ErrShredded", s, err)
			}
		}
	})
	torn := join(lines[0], lines[1], lines[2], lines[3][:len(lines[3])/2])
	t.Run("torn last line, database holds it", func(t *testing.T) {
		l, rep, err := w.reconcile(t, w.b, torn, ledger.Options{})
		if err != nil || rep.Repaired == nil || rep.Repaired.InDB != 1 || l.Len() != 3 {
			t.Fatalf("%+v, %v", rep.Repaired, err)
		}
	})
	t.Run("torn last line, older database", func(t *testing.T) {
		_, rep, err := w.reconcile(t, fresh(), torn, ledger.Options{})
		if !errors.Is(err, shredd.ErrLedger) {
			t.Fatalf("%+v, %v; want refused", rep, err)
		}
	})
	t.Run("cut at a line's end, older database", func(t *testing.T) {
		// Only the head kept with the root shows the missing line.
		_, rep, err := w.reconcile(t, fresh(), join(lines[0], lines[1], lines[2]), ledger.Options{})
		if !errors.Is(err, shredd.ErrLedger) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("%+v, %v; want refused for a missing line", rep, err)
		}
	})
	t.Run("accepted loss", func(t *testing.T) {
		db := fresh()
		l, rep, err := w.reconcile(t, db, torn, ledger.Options{AcceptLoss: true})
		if err != nil || rep.Repaired == nil || !rep.Repaired.Loss() || l.Len() != 2 || rep.Reapplied != 2 {
			t.Fatalf("%+v %+v, %v", rep, rep.Repaired, err)
		}
		h, _ := l.Head()
		var kept ledger.Head
		if _, err := ledger.ReadHead(ctx, w.root, erasure.HeadStream, &kept); err != nil || kept != h {
			t.Fatalf("the head kept after the repair: %+v, %v; want %+v", kept, err, h)
		}
	})
	t.Run("other subject key", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "forgets.ledger")
		l := openLedger(t, path, ledger.Options{Fingerprints: ledger.Fingerprints{SubjectKey: ledger.Fingerprint(ledger.FingerprintSubjectKey, []byte("a"))}})
		svc, done := service(t, w.b, l)
		defer done()
		if _, err := svc.Recovery().ReconcileLedger(ctx); err != nil {
			t.Fatal(err)
		}
		l.Close()
		_, err := ledger.OpenLines(path, ledgerKey, ledger.Options{Fingerprints: ledger.Fingerprints{SubjectKey: ledger.Fingerprint(ledger.FingerprintSubjectKey, []byte("b"))}})
		if !errors.Is(err, shredd.ErrLedger) || !strings.Contains(err.Error(), "subject.key") {
			t.Fatalf("a ledger of another subject key: %v", err)
		}
	})
}

// TestLedgerCompaction: compaction drops a prefix and says so in the
// header; a restart records nothing again; a deleted ledger is told apart
// (the head kept with the root names another instance).
func TestLedgerCompaction(t *testing.T) {
	ctx := context.Background()
	w := newLedgerWorld(t)
	l, rep, err := w.reconcile(t, w.b, w.raw, ledger.Options{})
	if err != nil || rep.Repaired != nil {
		t.Fatalf("%+v, %v", rep, err)
	}
	svc, done := service(t, w.b, l)
	defer done()
	if _, err := svc.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := w.root.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Recovery().CompactLedger(ctx, v.MinAvailable); err != nil || n != 3 || l.Len() != 0 {
		t.Fatalf("compaction: dropped %d, %v, %d left", n, err, l.Len())
	}
	h, _ := l.Header()
	if h.Compacted == nil || h.Compacted.Lines != 3 || h.Compacted.Seq != 3 {
		t.Fatalf("the compacted header: %+v", h.Compacted)
	}
	l.Close()
	again := openLedger(t, l.Path(), ledger.Options{})
	svc2, done2 := service(t, w.b, again)
	defer done2()
	if rep, err := svc2.Recovery().ReconcileLedger(ctx); err != nil || rep.Recorded != 0 || rep.Repaired != nil {
		t.Fatalf("a restart after compaction: %+v, %v; want nothing recorded again", rep, err)
	}
	again.Close()
	os.Remove(l.Path())
	gone := openLedger(t, l.Path(), ledger.Options{})
	svc3, done3 := service(t, w.b, gone)
	defer done3()
	rep, err = svc3.Recovery().ReconcileLedger(ctx)
	if err != nil || rep.Repaired == nil || !rep.Repaired.Replaced {
		t.Fatalf("a deleted ledger: %+v, %v; want it reported as replaced", rep, err)
	}
}

// TestLedgerConcurrentForgets: forgets answered at the same time share
// fsyncs, and every one of them is in the ledger when it is answered and
// after a reopen.
func TestLedgerConcurrentForgets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	l := openLedger(t, path, ledger.Options{})
	b := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			f, err := b.Service.Forget(ctx, "subject-"+string(rune('A'+i)))
			if err == nil && !l.Has(f.ID) {
				err = errors.New("answered before it was in the ledger")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if again := openLedger(t, path, ledger.Options{}); again.Len() != n {
		t.Fatalf("the reopened ledger holds %d forgets, want %d", again.Len(), n)
	}
}

// TestLedgerFirstFormat: a ledger of the first format (no header, no
// chain) is converted at open, keeping every forget; a changed line of it
// stops the start.
func TestLedgerFirstFormat(t *testing.T) {
	type v1 struct {
		Forget      string `json:"forget"`
		SID         string `json:"sid"`
		Gen         uint32 `json:"gen"`
		RequestedAt int64  `json:"requested_at"`
		CommittedAt int64  `json:"committed_at"`
		Deadline    int64  `json:"deadline"`
		Commitment  string `json:"commitment,omitempty"`
		RootVersion int    `json:"root_version"`
		LogSize     int64  `json:"log_size,omitempty"`
		MAC         string `json:"mac,omitempty"`
	}
	var raw []byte
	for i := range 3 {
		e := v1{Forget: strings.Repeat(string(rune('a'+i)), 32), SID: strings.Repeat("0", 64), Gen: 1, RequestedAt: 1, CommittedAt: 2, Deadline: 3, RootVersion: 1}
		b, _ := json.Marshal(e)
		m := hmac.New(sha256.New, ledgerKey)
		m.Write(b)
		e.MAC = hex.EncodeToString(m.Sum(nil))
		b, _ = json.Marshal(e)
		raw = append(append(raw, b...), '\n')
	}
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, path, ledger.Options{})
	if h, ok := l.Header(); !ok || h.Format != ledger.LinesFormat || l.Len() != 3 {
		t.Fatalf("converted ledger: %+v %v, %d forgets", h, ok, l.Len())
	}
	l.Close()
	if again := openLedger(t, path, ledger.Options{}); again.Len() != 3 {
		t.Fatalf("the converted ledger reopens with %d forgets", again.Len())
	}
	ls := bytes.SplitAfter(raw, []byte("\n"))
	ls[1] = bytes.Replace(ls[1], []byte(`"gen":1`), []byte(`"gen":2`), 1) // the second line
	bad := bytes.Join(ls, nil)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenLines(path, ledgerKey, ledger.Options{}); !errors.Is(err, shredd.ErrLedger) {
		t.Fatalf("a changed line of the first format: %v, want ErrLedger", err)
	}
}

// A ledger that does not take a forget's line (here its file closed under
// it) makes the forget fail as unavailable (503, retried), never a bare
// internal error, and its WriteErr says so until an append succeeds.
func TestLedgerWriteFailureUnavailable(t *testing.T) {
	ctx := context.Background()
	root, err := local.Open(filepath.Join(t.TempDir(), "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, filepath.Join(t.TempDir(), "forgets.ledger"), ledger.Options{})
	b := shreddtest.New(t, shreddtest.Options{Root: root, Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	if _, err := b.Eraser.Recovery().ReconcileLedger(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Service.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if l.WriteErr() != nil {
		t.Fatalf("WriteErr before any failure: %v", l.WriteErr())
	}
	l.Close()
	if _, err := b.Service.Forget(ctx, "alice"); !errors.Is(err, shredd.ErrUnavailable) || !errors.Is(err, shredd.ErrLedger) {
		t.Fatalf("a forget whose ledger line cannot be written: %v, want ErrUnavailable and ErrLedger", err)
	}
	if err := l.WriteErr(); !errors.Is(err, shredd.ErrLedger) {
		t.Fatalf("WriteErr after the failure: %v", err)
	}
}

// TestLedgerCorruptHeadRefused: a head kept with the root that does not
// parse (a wrong type, no instance, not an object) refuses the start and
// the start's read-only check, instead of checking the ledger without it:
// a ledger cut back, with a database restored from before its last
// forgets, would pass otherwise.
func TestLedgerCorruptHeadRefused(t *testing.T) {
	ctx := context.Background()
	w := newLedgerWorld(t)
	cut := w.raw[:bytes.LastIndexByte(w.raw[:len(w.raw)-1], '\n')+1] // the last line gone
	older := shreddtest.New(t, shreddtest.Options{Root: w.root, Kinds: []string{"episodic"}})
	mk := w.root.(keystore.MarkKeeper)
	for _, bad := range []string{`"x"`, `{"instance":"00112233445566778899aabbccddeeff","seq":"2"}`, `{"seq":2,"hash":"ab","lines":2}`} {
		t.Run(bad, func(t *testing.T) {
			if err := mk.KeepMark(ctx, erasure.HeadStream, []byte(bad)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "forgets.ledger")
			if err := os.WriteFile(path, cut, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := erasure.PrecheckLedger(ctx, older.DB, path, ledgerKey, w.root, false); !errors.Is(err, shredd.ErrLedger) || !errors.Is(err, keystore.ErrCorrupt) {
				t.Fatalf("precheck: %v; want a refusal naming a corrupt root", err)
			}
			l := openLedger(t, path, ledger.Options{})
			svc, done := service(t, older, l)
			defer done()
			if _, err := svc.Recovery().ReconcileLedger(ctx); !errors.Is(err, shredd.ErrLedger) || !errors.Is(err, keystore.ErrCorrupt) {
				t.Fatalf("reconcile: %v; want a refusal naming a corrupt root", err)
			}
			if got, err := mk.Mark(ctx, erasure.HeadStream); err != nil || string(got) != bad {
				t.Fatalf("the corrupt head was replaced: %s, %v", got, err)
			}
		})
	}
}

// TestLedgerHeadGoneRefused: once a head was kept with the root, the
// database pins it (headPin); a root that holds none then (the head
// removed from root.key, or a root file from before it) with a ledger cut
// back is a refused start and a check that reports the loss, where
// before it was checked as a ledger never headed.
func TestLedgerHeadGoneRefused(t *testing.T) {
	ctx := context.Background()
	w := newLedgerWorld(t)
	if pins, err := w.b.DB.SecretPins(ctx); err != nil || pins["ledger-head"] == "" {
		t.Fatalf("pins after the head was kept: %v, %v; want ledger-head", pins, err)
	}
	headless, err := local.Open(filepath.Join(t.TempDir(), "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	cut := w.raw[:bytes.LastIndexByte(w.raw[:len(w.raw)-1], '\n')+1]
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := erasure.PrecheckLedger(ctx, w.b.DB, path, ledgerKey, headless, false); !errors.Is(err, shredd.ErrLedger) || !strings.Contains(err.Error(), "holds none") {
		t.Fatalf("precheck with the head gone: %v; want refused", err)
	}
	if err := erasure.PrecheckLedger(ctx, w.b.DB, path, ledgerKey, headless, true); err != nil {
		t.Fatalf("precheck accepting the loss: %v", err)
	}
	c, err := erasure.CheckLedger(ctx, w.b.DB, path, ledgerKey, nil, nil, false)
	if err != nil || !c.HeadGone || !c.Damage() || !c.Loss() {
		t.Fatalf("check with the head gone: %+v, %v", c, err)
	}
}

// TestHeadStreamIsLegacy: the stream the ledger's head is kept under is
// the one a v1 root file's ledger_head is read as (keystore/local cannot
// import erasure, so the name is written twice and held equal here).
func TestHeadStreamIsLegacy(t *testing.T) {
	if erasure.HeadStream != local.LegacyHeadStream {
		t.Fatalf("erasure.HeadStream %q, keystore/local.LegacyHeadStream %q: an upgraded root file's head would be read as none", erasure.HeadStream, local.LegacyHeadStream)
	}
}
