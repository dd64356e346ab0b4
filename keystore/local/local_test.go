package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/roottest"
)

func TestConformance(t *testing.T) {
	roottest.Run(t, func(t *testing.T) (keystore.RootStore, func() keystore.RootStore) {
		path := filepath.Join(t.TempDir(), "root.key")
		s, err := local.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s, func() keystore.RootStore {
			r, err := local.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	})
}

func TestFileModeAndTrimLeavesNoOldKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "root.key")
	s, err := local.Open(path)
	if err != nil {
		t.Fatal(err)
	}
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
