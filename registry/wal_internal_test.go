package registry

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// testWALKey is the MAC key of the test WALs.
var testWALKey = WALKey(bytes.Repeat([]byte{7}, 32))

// walReg is the i-th test registration: parents and lineage vary with i,
// one lineage subject in two is direct.
func walReg(i int) Registration {
	r := Registration{Kind: "episodic", Holder: fmt.Sprint("h", i%3), Sealed: i%2 == 0,
		At: time.Unix(1700000000, int64(i)).UTC()}
	r.ID[0], r.ID[15] = byte(i), 0xaa
	for j := range i % 3 {
		var p shredd.ID
		p[0], p[1] = byte(i), byte(j+1)
		r.Parents = append(r.Parents, p)
	}
	for j := range 1 + i%4 {
		var ref envelope.Ref
		ref.SID[0], ref.SID[1], ref.Gen = byte(i), byte(j), uint32(j+1)
		r.Lineage = append(r.Lineage, ref)
		if j%2 == 0 {
			if r.Direct == nil {
				r.Direct = map[envelope.SID]bool{}
			}
			r.Direct[ref.SID] = true
		}
	}
	for j := range i % 4 { // the writer's reads, in three of four
		var l shredd.ID
		l[0], l[1], l[15] = byte(i), byte(j), 0x1e
		r.Reads = append(r.Reads, shredd.Read{Lease: l, How: readCodes[1+j%3]})
	}
	if i%3 == 1 {
		r.Writer = fmt.Sprint("writer-", i)
	}
	return r
}

// TestWALReads: a registration's read links round-trip through its
// record, one without them is encoded as before they existed, and a
// record with a read link of unknown kind, a flag 2 without links or an
// unknown flag does not parse.
func TestWALReads(t *testing.T) {
	for i := range 8 {
		r := walReg(i)
		got, err := decodeRegistration(encodeRegistration(nil, &r))
		if err != nil || !reflect.DeepEqual(got.Reads, r.Reads) || got.Writer != r.Writer {
			t.Fatalf("registration %d: reads %+v (%v), want %+v", i, got.Reads, err, r.Reads)
		}
	}
	plain := walReg(0) // no reads, no writer
	b := encodeRegistration(nil, &plain)
	if b[len(plain.ID)] != 0 && b[len(plain.ID)] != 1 {
		t.Fatalf("a registration without reads has flags %#x", b[len(plain.ID)])
	}
	withReads := walReg(5) // one read, no writer
	good := encodeRegistration(nil, &withReads)
	for name, mut := range map[string]func([]byte) []byte{
		"unknown kind":         func(b []byte) []byte { b[len(b)-1] = 9; return b },
		"kind zero":            func(b []byte) []byte { b[len(b)-1] = 0; return b },
		"flag 2 without reads": func(b []byte) []byte { b = b[:len(b)-len(shredd.ID{})-2]; return append(b, 0) },
		"unknown flag":         func(b []byte) []byte { b[len(withReads.ID)] |= 8; return b },
		"short":                func(b []byte) []byte { return b[:len(b)-1] },
	} {
		if _, err := decodeRegistration(mut(slices.Clone(good))); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// writeWAL appends groups of registrations (sizes) to a new WAL in dir
// and returns every registration in order.
func writeWAL(t *testing.T, dir string, segBytes int64, sizes ...int) []Registration {
	t.Helper()
	w, recs, warnings, err := openWAL(dir, testWALKey, segBytes, 0)
	if err != nil || len(recs) != 0 || len(warnings) != 0 {
		t.Fatalf("open a new WAL: %v %d %v", err, len(recs), warnings)
	}
	var all []Registration
	for _, n := range sizes {
		var group []*Registration
		for range n {
			r := walReg(len(all))
			all = append(all, r)
			group = append(group, &all[len(all)-1])
		}
		if err := w.Append(appendFrame(nil, testWALKey, w.Next(), group), n); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return all
}

func regsOf(recs []walRecord) []Registration {
	out := make([]Registration, len(recs))
	for i, r := range recs {
		out[i] = r.reg
	}
	return out
}

// Registrations come back from the WAL exactly as written, numbered from
// 1, across frames and segments, and only those after folded.
func TestWALReadBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), WALDir)
	all := writeWAL(t, dir, 200, 3, 1, 5, 2) // 200 bytes: a segment per frame or two
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	w, recs, warnings, err := openWAL(dir, testWALKey, 200, 0)
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	if got := regsOf(recs); !reflect.DeepEqual(got, all) {
		t.Fatalf("read back:\n%+v\nwant\n%+v", got, all)
	}
	for i, r := range recs {
		if r.seq != uint64(i+1) {
			t.Fatalf("record %d has sequence number %d", i, r.seq)
		}
	}
	if w.Next() != uint64(len(all)+1) {
		t.Fatalf("next %d, want %d", w.Next(), len(all)+1)
	}
	if n, err := Acknowledged(dir, testWALKey); err != nil || n != uint64(len(all)) {
		t.Fatalf("acknowledged: %d, %v; want %d", n, err, len(all))
	}
	if n, err := Acknowledged(filepath.Join(dir, "none"), testWALKey); err != nil || n != 0 {
		t.Fatalf("acknowledged of no WAL: %d, %v", n, err)
	}
	_, recs, _, err = openWAL(dir, testWALKey, 200, 4)
	if err != nil || len(recs) != len(all)-4 || recs[0].seq != 5 {
		t.Fatalf("after folded 4: %v, %d records", err, len(recs))
	}
}

// A last frame cut short or scrambled (a crash before its fdatasync) is
// cut off with a warning; the frames before it are kept, and the next
// append continues after them.
func TestWALTornLastFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(b []byte, first int) []byte // first: the first frame's length
	}{
		{"cut short", func(b []byte, _ int) []byte { return b[:len(b)-7] }},
		{"header only", func(b []byte, first int) []byte { return b[:first+frameHeaderSize] }},
		{"zeros after a part", func(b []byte, first int) []byte {
			return append(b[:first+frameHeaderSize+3], make([]byte, 300)...)
		}},
		{"scrambled body", func(b []byte, _ int) []byte { b[len(b)-3] ^= 0xff; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), WALDir)
			all := writeWAL(t, dir, 0, 2, 3)
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			b, _ := os.ReadFile(segs[0])
			var keep int
			_, first, err := parseFrame(b, testWALKey, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The second frame is the torn one.
			keep = first
			all = all[:2]
			if err := os.WriteFile(segs[0], tc.tear(b, first), 0o600); err != nil {
				t.Fatal(err)
			}
			w, recs, warnings, err := openWAL(dir, testWALKey, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "torn") {
				t.Fatalf("warnings %q, want one about the torn frame", warnings)
			}
			if got := regsOf(recs); !reflect.DeepEqual(got, all) {
				t.Fatalf("kept %d registrations, want %d", len(got), len(all))
			}
			if fi, _ := os.Stat(segs[0]); fi.Size() != int64(keep) {
				t.Fatalf("segment of %d bytes after the cut, want %d", fi.Size(), keep)
			}
			if w.Next() != uint64(len(all)+1) {
				t.Fatalf("next %d, want %d", w.Next(), len(all)+1)
			}
		})
	}
}

// A damaged frame that a valid frame follows is no torn write: those
// registrations were acknowledged, and the WAL refuses to open. So is
// damage anywhere in a segment that a later segment follows.
func TestWALDamaged(t *testing.T) {
	t.Run("frame before another", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 0, 2, 3)
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		b, _ := os.ReadFile(segs[0])
		b[frameHeaderSize+5] ^= 1
		if err := os.WriteFile(segs[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := openWAL(dir, testWALKey, 0, 0); !errors.Is(err, ErrWALDamaged) {
			t.Fatalf("open: %v, want ErrWALDamaged", err)
		}
	})
	t.Run("segment before another", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 1, 2, 3) // a segment per frame
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		if len(segs) != 2 {
			t.Fatalf("%d segments", len(segs))
		}
		b, _ := os.ReadFile(segs[0])
		if err := os.WriteFile(segs[0], b[:len(b)-1], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := openWAL(dir, testWALKey, 0, 0); !errors.Is(err, ErrWALDamaged) {
			t.Fatalf("open: %v, want ErrWALDamaged", err)
		}
	})
	t.Run("a planted last frame", func(t *testing.T) {
		// Whole and with sound checksums, under another key: no torn
		// write, and nothing shredd wrote.
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 0, 2)
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		f, err := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		other := WALKey(bytes.Repeat([]byte{8}, 32))
		if _, err := f.Write(appendFrame(nil, other, 3, []*Registration{ptr(walReg(3))})); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, _, _, err := openWAL(dir, testWALKey, 0, 0); !errors.Is(err, ErrWALDamaged) || !strings.Contains(err.Error(), "MAC") {
			t.Fatalf("open: %v, want ErrWALDamaged naming the MAC", err)
		}
	})
	t.Run("a whole frame out of sequence, named for the next segment", func(t *testing.T) {
		// A segment of another WAL under the same key (another copy),
		// named for the next number: whole and authentic, never torn.
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 0, 2)
		frame := appendFrame(nil, testWALKey, 7, []*Registration{ptr(walReg(7))})
		if err := os.WriteFile(filepath.Join(dir, segName(3)), frame, 0o600); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(filepath.Join(dir, segName(3)))
		if _, _, _, err := openWAL(dir, testWALKey, 0, 0); !errors.Is(err, ErrWALDamaged) || !strings.Contains(err.Error(), "out of sequence") {
			t.Fatalf("open: %v, want ErrWALDamaged", err)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, segName(3))); !bytes.Equal(before, after) {
			t.Fatal("the refused open cut the segment")
		}
	})
	t.Run("an empty segment named for the next registration", func(t *testing.T) {
		// A crash between creating a segment and its first frame: the
		// next append goes into it rather than failing for good.
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 0, 2)
		if err := os.WriteFile(filepath.Join(dir, segName(3)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		w, _, _, err := openWAL(dir, testWALKey, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(appendFrame(nil, testWALKey, w.Next(), []*Registration{ptr(walReg(2))}), 1); err != nil {
			t.Fatalf("append after an empty segment: %v", err)
		}
		w.Close()
		_, recs, _, err := openWAL(dir, testWALKey, 0, 0)
		if err != nil || len(recs) != 3 {
			t.Fatalf("read back: %d registrations, %v", len(recs), err)
		}
	})
	t.Run("a file that is no segment", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), WALDir)
		writeWAL(t, dir, 0, 1)
		if err := os.WriteFile(filepath.Join(dir, "planted.seg"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := openWAL(dir, testWALKey, 0, 0); !errors.Is(err, ErrWALDamaged) {
			t.Fatalf("open: %v, want ErrWALDamaged", err)
		}
	})
}

// Registrations that are neither folded nor in a segment (a segment
// removed, or a backup older than the newest restored) are reported.
func TestWALGap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), WALDir)
	writeWAL(t, dir, 1, 2, 3, 1)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	_, recs, warnings, err := openWAL(dir, testWALKey, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "registrations 3 to 5") {
		t.Fatalf("warnings %q", warnings)
	}
	if len(recs) != 3 {
		t.Fatalf("%d registrations read", len(recs))
	}
	// Folded past the gap: nothing is missing.
	if _, _, warnings, err = openWAL(dir, testWALKey, 0, 5); err != nil || len(warnings) != 0 {
		t.Fatalf("folded past the gap: %v %q", err, warnings)
	}
}

func ptr[T any](v T) *T { return &v }

// The frame format seen from the registry's tests (ledger.Segments holds
// it): a frame's header size and magic, and parseFrame, the first frame of
// b with its registrations.
const (
	frameHeaderSize = 48
	walMagic        = "SRW1"
)

// segName is a segment's file name.
func segName(first uint64) string { return fmt.Sprintf("%016x.seg", first) }

func parseFrame(b, key []byte, seq uint64) ([]walRecord, int, error) {
	recs, off, err := walConfig("", key, 0, 0).Scan(b, seq)
	if off == 0 {
		if err == nil {
			err = errors.New("no frame")
		}
		return nil, 0, err
	}
	n := frameHeaderSize + int(binary.LittleEndian.Uint32(b[20:]))
	count := int(binary.LittleEndian.Uint32(b[16:]))
	out := make([]walRecord, 0, count)
	for _, r := range recs[:count] {
		reg, err := decodeRegistration(r.Body)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, walRecord{seq: r.Seq, reg: reg})
	}
	return out, n, nil
}

// FuzzWALFrame: parseFrame never panics, and a frame it accepts is
// exactly what appendFrame makes of its registrations.
func FuzzWALFrame(f *testing.F) {
	for _, n := range []int{1, 2, 5} {
		var group []*Registration
		for i := range n {
			group = append(group, ptr(walReg(i)))
		}
		f.Add(appendFrame(nil, testWALKey, 1, group))
	}
	f.Add([]byte(walMagic))
	f.Add(make([]byte, frameHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, n, err := parseFrame(b, testWALKey, 1)
		if err != nil {
			return
		}
		var group []*Registration
		for i := range recs {
			r := recs[i].reg
			group = append(group, &r)
		}
		if again := appendFrame(nil, testWALKey, 1, group); !bytes.Equal(again, b[:n]) {
			t.Fatalf("frame of %d bytes encodes back to %d different bytes", n, len(again))
		}
	})
}
