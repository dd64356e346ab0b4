package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var errTestDamaged = errors.New("test log damaged")

// testConfig is a Segments log in dir under a fixed key.
func testConfig(dir string, segBytes int64) Config {
	return Config{Dir: dir, Key: bytes.Repeat([]byte{7}, 32), SegmentBytes: segBytes, Name: "test log", Prefix: "ledger test", Damaged: errTestDamaged}
}

// testRec is the i-th test record.
func testRec(i int) []byte { return []byte(fmt.Sprintf("record %d", i)) }

// frameOf is one frame of recs, numbered from w's next.
func frameOf(w *Segments, recs ...[]byte) []byte {
	return AppendFrame(nil, w.Key(), w.Next(), len(recs), func(b []byte, i int) []byte { return append(b, recs[i]...) })
}

// bodies are the records' bodies.
func bodies(recs []Record) [][]byte {
	var out [][]byte
	for _, r := range recs {
		out = append(out, r.Body)
	}
	return out
}

// writeLog writes n records to the log in dir, one frame each, with
// segments of segBytes.
func writeLog(t *testing.T, dir string, segBytes int64, n int) {
	t.Helper()
	w, _, _, err := Open(testConfig(dir, segBytes), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Append(frameOf(w, testRec(i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A segment is written with zeros ahead of its frames, so that a group's
// fdatasync neither grows the file nor allocates its blocks: the file's
// size stays put across appends within zeroStep, and the zeros go when
// the segment is closed. The zeros after the frames of a process that
// died are the segment's end, in the last segment or any other: no
// warning, every registration back, the file cut to its frames.
func TestSegmentsPrezero(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w, _, _, err := Open(testConfig(dir, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]byte
	var sizes []int64
	for i := range 3 {
		r := testRec(i)
		all = append(all, r)
		if err := w.Append(frameOf(w, r), 1); err != nil {
			t.Fatal(err)
		}
		fi, err := w.f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	if sizes[0] != zeroStep || sizes[1] != zeroStep || sizes[2] != zeroStep {
		t.Fatalf("segment sizes after each append %v, want %d each", sizes, zeroStep)
	}
	frames := w.size
	// A frame larger than what is left of the zeroed part: zeros for it.
	big := bytes.Repeat([]byte("h"), zeroStep)
	all = append(all, big)
	if err := w.Append(frameOf(w, big), 1); err != nil {
		t.Fatal(err)
	}
	if w.zeroed < w.size || w.zeroed < zeroStep+frames {
		t.Fatalf("zeroed %d for frames of %d bytes", w.zeroed, w.size)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	// The process dies here: the file keeps its zeros.
	b, _ := os.ReadFile(segs[0])
	if int64(len(b)) != w.zeroed || !allZero(b[w.size:]) {
		t.Fatalf("segment of %d bytes, want %d ending in zeros", len(b), w.zeroed)
	}
	size := w.size
	w.f.Close()
	w2, recs, warnings, err := Open(testConfig(dir, 0), 0)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("open: %v %q", err, warnings)
	}
	if got := bodies(recs); !reflect.DeepEqual(got, all) {
		t.Fatalf("read back %d records, want %d", len(got), len(all))
	}
	if fi, _ := os.Stat(segs[0]); fi.Size() != size {
		t.Fatalf("segment of %d bytes after open, want its frames' %d", fi.Size(), size)
	}
	// The next process appends to a new segment and closes it cut.
	r := testRec(4)
	all = append(all, r)
	if err := w2.Append(frameOf(w2, r), 1); err != nil {
		t.Fatal(err)
	}
	last := w2.size
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ = filepath.Glob(filepath.Join(dir, "*.seg"))
	if fi, _ := os.Stat(segs[1]); len(segs) != 2 || fi.Size() != last {
		t.Fatalf("%d segments, the last of %d bytes after close, want 2 and %d", len(segs), fi.Size(), last)
	}
	// Zeros after the frames of a segment that another follows.
	f, err := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 5000))
	f.Close()
	_, recs, warnings, err = Open(testConfig(dir, 0), 0)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("open: %v %q", err, warnings)
	}
	if got := bodies(recs); !reflect.DeepEqual(got, all) {
		t.Fatalf("read back %d records, want %d", len(got), len(all))
	}
	if n, err := testConfig(dir, 0).Acknowledged(); err != nil || n != uint64(len(all)) {
		t.Fatalf("acknowledged: %d, %v; want %d", n, err, len(all))
	}
}

// Folded segments go, except the one being appended to and those a
// recorded backup does not cover, up to the retention bound.
func TestSegmentsRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	writeLog(t, dir, 1, 4) // four segments, records 1..4
	w, _, _, err := Open(testConfig(dir, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int { s, _ := filepath.Glob(filepath.Join(dir, "*.seg")); return len(s) }
	two := w.segs[2].size + w.segs[3].size
	if got := w.RetainedFrom(4, two); got != 2 {
		t.Fatalf("retained from %d with room for the newest two segments, want 2", got)
	}
	if got := w.RetainedFrom(4, 4*two); got != 0 {
		t.Fatalf("retained from %d with room for all, want 0", got)
	}
	if n, err := w.RemoveThrough(2); err != nil || n != 2 || count() != 2 {
		t.Fatalf("remove through 2: %d %v, %d left", n, err, count())
	}
	// The segment being appended to stays.
	if err := w.Append(frameOf(w, testRec(9)), 1); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RemoveThrough(5); err != nil || n != 2 || count() != 1 {
		t.Fatalf("remove through 5: %d %v, %d left", n, err, count())
	}
}
