package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// committed is the directory of the released vectors, from this package.
const committed = "../../envelope/testdata/vectors"

// TestCommittedVectors checks that the generator reproduces every committed
// vector byte for byte, and that every committed vector is still generated:
// released vectors never change and are never removed.
func TestCommittedVectors(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	generated := make(map[string]bool)
	for _, f := range files {
		generated[f.name] = true
		got, err := os.ReadFile(filepath.Join(committed, f.name))
		if err != nil {
			t.Errorf("%s: %v (a new vector? run: go run ./testkit/vectorgen -out envelope/testdata/vectors)", f.name, err)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s: the generator no longer reproduces the released vector", f.name)
		}
	}
	entries, err := os.ReadDir(committed)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !generated[e.Name()] {
			t.Errorf("%s: committed but not generated", e.Name())
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].data, b[i].data) {
			t.Errorf("file %d (%s) differs between runs", i, a[i].name)
		}
	}
}

func TestRunAppendOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vectors")
	if err := run(dir, io.Discard); err != nil {
		t.Fatalf("first run: %v", err)
	}
	// A second run over identical files succeeds and writes nothing.
	if err := run(dir, io.Discard); err != nil {
		t.Fatalf("second run: %v", err)
	}

	// A missing vector is written again, identical.
	name := filepath.Join(dir, "single_subject")
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, io.Discard); err != nil {
		t.Fatalf("run after removal: %v", err)
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, want) {
		t.Fatal("re-created vector differs")
	}

	t.Run("changed", func(t *testing.T) {
		changed := append(bytes.Clone(want), "tampered\n"...)
		if err := os.WriteFile(name, changed, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(name, want, 0o644)
		other := filepath.Join(dir, "wrong_key")
		if err := os.Remove(other); err != nil {
			t.Fatal(err)
		}
		err := run(dir, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
			t.Fatalf("run over a changed vector: got %v, want a refusal", err)
		}
		if got, _ := os.ReadFile(name); !bytes.Equal(got, changed) {
			t.Error("changed vector was overwritten")
		}
		if _, err := os.Stat(other); err == nil {
			t.Error("a failing run wrote new vectors")
		}
	})

	t.Run("unknown", func(t *testing.T) {
		extra := filepath.Join(dir, "removed_case")
		if err := os.WriteFile(extra, []byte("expect: success\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(extra)
		if err := run(dir, io.Discard); err == nil || !strings.Contains(err.Error(), "not generated") {
			t.Fatalf("run with an unknown vector: got %v, want an error", err)
		}
	})
}
