package bundle_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shredd/shredd/bundle"
)

// FuzzRead checks that Read never panics, that every refusal wraps
// ErrFormat, and that what it accepts Write writes back in the one
// encoding: a Read of that gives the same bundle, and a Write of it the
// same bytes. Seeds: a real export (signed events in a translog.Log on a
// SQLite file, see makeExport), the committed example export of
// docs/examples, and archives from testdata/.
func FuzzRead(f *testing.F) {
	f.Add(makeExport(f).archive(f))
	seeds, _ := filepath.Glob("testdata/*.tar.gz")
	seeds = append(seeds, "../docs/examples/walkthrough.export.tar.gz")
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(checkRead)
}

// FuzzReadTar is FuzzRead on the uncompressed tar: the fuzzer mutates tar
// headers, names and contents, which mutations of the compressed stream
// rarely reach (they mostly break the deflate stream or its checksum).
func FuzzReadTar(f *testing.F) {
	for _, archive := range [][]byte{makeExport(f).archive(f), readFile(f, "../docs/examples/walkthrough.export.tar.gz")} {
		zr, err := gzip.NewReader(bytes.NewReader(archive))
		if err != nil {
			f.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(raw)
		zw.Close()
		checkRead(t, buf.Bytes())
	})
}

func readFile(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// checkRead is the property both fuzz targets check.
func checkRead(t *testing.T, data []byte) {
	b, err := bundle.Read(bytes.NewReader(data))
	if err != nil {
		if !errors.Is(err, bundle.ErrFormat) {
			t.Fatalf("Read: %v does not wrap ErrFormat", err)
		}
		return
	}
	for _, e := range b.Entries {
		if e.Data == nil || e.Proof == nil {
			t.Fatalf("Read gave entry %s without its data or proof", e.EntryName())
		}
	}
	var first bytes.Buffer
	if err := b.Write(&first); err != nil {
		t.Fatalf("Write of what Read accepted: %v", err)
	}
	b2, err := bundle.Read(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatalf("Read of what Write wrote: %v", err)
	}
	if b2.Forget != b.Forget || !bytes.Equal(b2.Attestation, b.Attestation) || !bytes.Equal(b2.AttestationPub, b.AttestationPub) ||
		!bytes.Equal(b2.LogKey, b.LogKey) || !bytes.Equal(b2.Checkpoint, b.Checkpoint) || !bytes.Equal(b2.Consistency, b.Consistency) ||
		!slices.EqualFunc(b2.Entries, b.Entries, equalEntry) {
		t.Fatalf("Read of Write gave another bundle")
	}
	var second bytes.Buffer
	if err := b2.Write(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("Write of a Read of Write's archive gave other bytes")
	}
}
