package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/roottest"
)

func TestConformance(t *testing.T) {
	roottest.Run(t, func(t *testing.T) (keystore.RootStore, func() keystore.RootStore) {
		s, path := freshRoot(t)
		return s, func() keystore.RootStore {
			return mustOpen(t, path)
		}
	})
}

func TestFileModeAndTrimLeavesNoOldKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "root.key")
	s := mustOpen(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("root file mode %v, want 0600", st.Mode().Perm())
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := s.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trim(ctx, v); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The version-1 key line of the old file must not survive in the new one.
	var oldKey []byte
	for _, line := range bytes.Split(before, []byte("\n")) {
		if bytes.Contains(line, []byte(`"1":`)) {
			oldKey = bytes.TrimSpace(line)
		}
	}
	if len(oldKey) == 0 || bytes.Contains(after, oldKey) {
		t.Fatalf("old version key still in root file after trim")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("data dir holds %d files after trim, want only the root file", len(ents))
	}
}

func TestCorruptFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "root.key")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Open(path); err == nil {
		t.Fatal("corrupt root file opened")
	}
}

// rootFields reads the root file at path as its JSON fields.
func rootFields(t *testing.T, path string) map[string]any {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(mustRead(t, path), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// writeFields writes f over the root file at path, as an edit by hand or an
// older release would.
func writeFields(t *testing.T, path string, f map[string]any) {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestV1LedgerHeadBecomesMark: a root file of format shredd-root/v1 kept the
// forget ledger's head in its field ledger_head; it is read as the mark of
// LegacyHeadStream, and the next write makes a v2 file that keeps it there
// and has no ledger_head field.
func TestV1LedgerHeadBecomesMark(t *testing.T) {
	ctx := context.Background()
	_, path := freshRoot(t)
	f := rootFields(t, path)
	if f["format"] != "shredd-root/v2" {
		t.Fatalf("a new root file has format %v, want shredd-root/v2", f["format"])
	}
	head := `{"instance":"00112233445566778899aabbccddeeff","seq":3,"hash":"ab12","lines":3}`
	f["format"] = "shredd-root/v1"
	f["ledger_head"] = json.RawMessage(head)
	writeFields(t, path, f)
	if got, err := local.ReadMark(path, local.LegacyHeadStream); err != nil || string(got) != head {
		t.Fatalf("v1 head read as mark: %s, %v; want %s", got, err, head)
	}
	r := mustOpen(t, path)
	if err := r.KeepMark(ctx, "registrations", []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if b := mustRead(t, path); bytes.Contains(b, []byte("ledger_head")) || !bytes.Contains(b, []byte(`"shredd-root/v2"`)) {
		t.Fatalf("the rewritten file is not v2 without ledger_head:\n%s", b)
	}
	if got, err := r.Mark(ctx, local.LegacyHeadStream); err != nil || string(got) != head {
		t.Fatalf("the head after the rewrite: %s, %v; want %s", got, err, head)
	}
}

// TestV1LedgerHeadWins: a v1 file is written by a release that keeps its
// head in ledger_head and passes marks through unread, so its ledger_head
// is the head even where a later release left a mark of the stream in it
// (an upgrade, then the format edited back and the old release run); and
// a ledger_head of the wrong type is a corrupt file, as it was for v1's
// releases.
func TestV1LedgerHeadWins(t *testing.T) {
	_, path := freshRoot(t)
	f := rootFields(t, path)
	write := func(head string) {
		t.Helper()
		f["format"] = "shredd-root/v1"
		f["ledger_head"] = json.RawMessage(head)
		f["marks"] = map[string]json.RawMessage{local.LegacyHeadStream: json.RawMessage(`{"instance":"00112233445566778899aabbccddeeff","seq":1,"hash":"aa","lines":1}`)}
		writeFields(t, path, f)
	}
	newer := `{"instance":"00112233445566778899aabbccddeeff","seq":2,"hash":"bb","lines":2}`
	write(newer)
	if got, err := local.ReadMark(path, local.LegacyHeadStream); err != nil || string(got) != newer {
		t.Fatalf("head of a v1 file with both: %s, %v; want its ledger_head %s", got, err, newer)
	}
	write(`{"instance":"00112233445566778899aabbccddeeff","seq":"2","hash":"bb","lines":2}`)
	if _, err := local.Open(path); !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("a v1 ledger_head of the wrong type: %v, want ErrCorrupt", err)
	}
}

// TestV2LedgerHeadRefused: a v2 file never holds a ledger_head field; one
// put there by hand is a corrupt file, not a field read as nothing.
func TestV2LedgerHeadRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "root.key")
	if _, err := local.Open(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	f["ledger_head"] = map[string]any{"instance": "00112233445566778899aabbccddeeff", "seq": 1, "hash": "aa", "lines": 1}
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Open(path); !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("a v2 file with ledger_head: %v, want ErrCorrupt", err)
	}
}
