package registry

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
)

// The registration WAL (docs/design.md, "The registration WAL"). Where one
// process owns the database (SQLite), a registration is acknowledged once
// it is in an append-only segment file of the WAL and fdatasync'd: one
// frame and one fdatasync per group of concurrent registrations, instead
// of a database transaction with its pages and its COMMIT. The folder
// moves the registrations into the tables in the background, in large
// transactions (fold.go), and the segments whose registrations are folded
// (and covered by the newest backup shredd took) are removed.
//
// A segment is a file wal/<first sequence number, 16 hex digits>.seg of
// frames, each one group:
//
//	magic "SRW1" | header CRC | first seq u64 | count u32 | body length u32 | body CRC | 0 u32 | MAC (16 bytes)
//	body: count times (uvarint length | registration)
//
// then, in the segment being appended to, zeros (prezero); little-endian,
// CRC-32C; the header CRC covers the header's bytes after
// it up to the MAC. The MAC is HMAC-SHA256 under the WAL key (WALKey,
// derived from the subject secret), cut to 16 bytes, over the first 32
// bytes of the header and the body: the CRCs tell a torn write, the MAC a
// frame shredd did not write (a planted or edited segment), which the
// registry refuses instead of registering. Sequence numbers run on from frame to frame and from segment to
// segment. A frame is written only after the previous one was synced, so
// only the last frame of the last segment can be torn (written in part
// when the process or the machine died, and never acknowledged).

const (
	walMagic        = "SRW1"
	frameHeaderSize = 48
	frameMACOffset  = 32
	// LabelWAL derives the registration WAL's MAC key from the subject
	// secret (WALKey).
	LabelWAL = "shredd/v1/registration-wal"
	// maxFrameBody bounds a frame's body: a group is at most maxRecordGroup
	// registrations of at most envelope.MaxLineage refs each.
	maxFrameBody = 1 << 30
	// DefaultSegmentBytes is the size past which the WAL starts a new
	// segment.
	DefaultSegmentBytes = 64 << 20
	// WALDir is the WAL's folder in the data directory.
	WALDir = "wal"
)

// ErrWALDamaged means the registration WAL holds a damaged frame that a
// later frame follows: registrations that were acknowledged can no longer
// be read, and the registry refuses to open rather than lose them
// silently. docs/operations.md says what to do.
var ErrWALDamaged = errors.New("registration WAL damaged")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errFrameMAC is a frame whose checksums hold and whose MAC does not: not
// a torn write but a frame shredd did not write.
var errFrameMAC = errors.New("the frame's MAC does not verify: shredd did not write it")

// errFrameSeq is a frame whose header checksum holds and whose sequence
// number is not the one its place in the WAL needs: a whole frame of
// another segment or instance, never a torn write.
var errFrameSeq = errors.New("a whole frame out of sequence: not this WAL's frame for its place")

// WALKey derives the registration WAL's MAC key from the subject secret.
func WALKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(LabelWAL))
	return m.Sum(nil)
}

// frameMAC is the MAC of a frame: its header's first 32 bytes and body.
func frameMAC(key, head, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(head[:frameMACOffset])
	m.Write(body)
	return m.Sum(nil)[:frameHeaderSize-frameMACOffset]
}

// walSegment is one segment file: the sequence numbers first..last
// (last = first-1 when it holds none).
type walSegment struct {
	path        string
	first, last uint64
	size        int64 // bytes
}

// wal is the registration WAL's files: the segments, the one being
// appended to, and the next sequence number.
type wal struct {
	key      []byte // the MAC key (WALKey)
	dir      string
	segBytes int64
	segs     []walSegment // in order; the last is the one appended to when f is set
	f        *os.File     // the segment being appended to, nil until the first append of this process
	size     int64        // bytes of frames in f
	zeroed   int64        // bytes of f written, frames then zeros (prezero)
	next     uint64       // the sequence number of the next registration
	lastMAC  []byte       // the MAC of the frame that ends at next-1; nil when no segment holds it
	broken   error        // a write or sync failed: no more appends (its state on disk is unknown)
}

// walRecord is one registration read back from the WAL.
type walRecord struct {
	seq uint64
	reg Registration
}

// segName is the file name of the segment whose first sequence number is
// first.
func segName(first uint64) string { return fmt.Sprintf("%016x.seg", first) }

// openWAL opens the WAL in dir (created 0700 when missing), reads every
// segment, cuts a torn last frame, and returns the registrations after
// folded (the last sequence number the tables hold), in order, with a
// warning for each thing it repaired or found missing. A damaged frame
// that a later frame follows gives ErrWALDamaged.
func openWAL(dir string, key []byte, segBytes int64, folded uint64) (*wal, []walRecord, []string, error) {
	if len(key) < 32 {
		return nil, nil, nil, fmt.Errorf("registry: wal: a MAC key of %d bytes, want 32: %w", len(key), shredd.ErrInvalid)
	}
	if segBytes <= 0 {
		segBytes = DefaultSegmentBytes
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, nil, nil, fmt.Errorf("registry: wal: %w", err)
	}
	firsts, err := listSegments(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	w := &wal{key: key, dir: dir, segBytes: segBytes}
	for _, first := range firsts {
		w.segs = append(w.segs, walSegment{path: filepath.Join(dir, segName(first)), first: first})
	}
	var out []walRecord
	var warnings []string
	expect := uint64(0) // the next sequence number a segment should start with; 0 before the first
	for i := range w.segs {
		seg := &w.segs[i]
		if expect != 0 && seg.first != expect {
			warnings = append(warnings, gapWarning(expect, seg.first, folded))
		}
		recs, err := w.readSegment(seg, i == len(w.segs)-1, &warnings)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range recs {
			if r.seq > folded {
				out = append(out, r)
			}
		}
		expect = seg.last + 1
	}
	w.next = max(expect, folded+1, 1)
	if w.next != expect {
		w.lastMAC = nil // the frame that ends at next-1 is in no segment
	}
	if len(out) > 0 && out[0].seq > folded+1 {
		warnings = append(warnings, gapWarning(folded+1, out[0].seq, folded))
	}
	return w, out, slices.DeleteFunc(warnings, func(s string) bool { return s == "" }), nil
}

// listSegments checks, changing nothing, that dir is the WAL's own
// directory (not a symlink, not writable by others) holding segments only,
// and returns their first sequence numbers in order. The open (openWAL)
// and the start's read-only check (CheckWAL) refuse alike.
func listSegments(dir string) ([]uint64, error) {
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("registry: wal: %s: %w: not a directory (a symlink is refused): nothing was changed; put the directory itself in its place (for a symlink: rm %s, then mv the directory it named to %s)", dir, datadir.ErrUnsafe, dir, dir)
	}
	if err := datadir.CheckDir(dir); err != nil {
		return nil, fmt.Errorf("registry: wal: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("registry: wal: %w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		first, ok := parseSegName(e.Name())
		if !ok {
			return nil, fmt.Errorf("registry: wal: %s: %w: not a segment of the registration WAL; nothing was changed: move it out of %s", e.Name(), ErrWALDamaged, dir)
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	return firsts, nil
}

// Acknowledged returns the sequence number of the last registration in
// the WAL in dir (0 for none), reading it without changing anything:
// what a process beside the one that owns the WAL (shredd backup) asks
// before it waits for the fold (BackupPoint) to reach it. A frame that
// does not parse ends the reading there (it may be being written).
func Acknowledged(dir string, key []byte) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("registry: wal: %w", err)
	}
	var last uint64
	for _, e := range entries {
		first, ok := parseSegName(e.Name())
		if !ok {
			continue
		}
		b, err := datadir.Read(filepath.Join(dir, e.Name()), datadir.Secret, 1<<40)
		if err != nil {
			return 0, fmt.Errorf("registry: wal: %w", err)
		}
		if recs, _, _ := scanFrames(b, key, first); len(recs) > 0 {
			last = max(last, recs[len(recs)-1].seq)
		}
	}
	return last, nil
}

// gapWarning says that the sequence numbers from..to-1 are in no segment.
func gapWarning(from, to, folded uint64) string {
	if to <= folded+1 {
		return "" // folded already: only the tables need them
	}
	return fmt.Sprintf("registration WAL: registrations %d to %d are in no segment and not in the database "+
		"(a restore of an older backup than the newest shredd took, or a segment removed by hand): "+
		"artifacts sealed then are refused as unknown until re-registered (shredd reregister)", max(from, folded+1), to-1)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseSegName parses a segment's file name.
func parseSegName(name string) (uint64, bool) {
	h, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(h) != 16 {
		return 0, false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// readSegment reads seg's frames and sets seg.last. In the last segment a
// damaged frame that no valid frame follows is a torn write: the file is
// cut there (with a warning). Anywhere else a damaged frame is
// ErrWALDamaged.
func (w *wal) readSegment(seg *walSegment, last bool, warnings *[]string) ([]walRecord, error) {
	b, err := datadir.Read(seg.path, datadir.Secret, 1<<40)
	if err != nil {
		return nil, fmt.Errorf("registry: wal: %w", err)
	}
	v, err := judgeSegment(seg.path, b, w.key, seg.first, last)
	if err != nil {
		return nil, err
	}
	seg.last = seg.first - 1 + uint64(len(v.recs))
	seg.size = int64(v.end)
	if v.mac != nil {
		w.lastMAC = bytes.Clone(v.mac)
	}
	if v.end == len(b) {
		return v.recs, nil
	}
	if err := cutFile(seg.path, int64(v.end)); err != nil {
		return nil, err
	}
	if !v.zeros {
		*warnings = append(*warnings, fmt.Sprintf("registration WAL: cut a torn last frame of %d bytes from %s (never acknowledged)", len(b)-v.end, filepath.Base(seg.path)))
	}
	return v.recs, nil
}

// segmentVerdict is what judgeSegment found in a segment's bytes.
type segmentVerdict struct {
	recs  []walRecord
	end   int    // where its whole frames end: the rest is cut at open
	mac   []byte // the last whole frame's MAC; nil for none
	zeros bool   // what follows end is the zeros written ahead (prezero), not a torn frame
}

// judgeSegment reads the frames of a segment's bytes b without changing
// anything. In the last segment (last) a damaged frame that no valid frame
// follows is a torn write, to be cut at end; the zeros written ahead of
// the frames are its end too. Anywhere else a damaged frame, a whole frame
// out of sequence or a frame whose MAC does not verify is ErrWALDamaged,
// naming the file and the fix. The start's read-only check (CheckWAL) and
// the open (readSegment) judge alike.
func judgeSegment(path string, b, key []byte, first uint64, last bool) (segmentVerdict, error) {
	out, off, mac, err := scanFramesMAC(b, key, first)
	v := segmentVerdict{recs: out, end: off, mac: mac}
	if err == nil {
		return v, nil
	}
	if allZero(b[off:]) {
		v.zeros = true
		return v, nil
	}
	if !last || errors.Is(err, errFrameMAC) || errors.Is(err, errFrameSeq) || validFrameAfter(b[off+1:], key, first+uint64(len(out))) {
		return v, fmt.Errorf("registry: wal: %s at byte %d: %w: %v; nothing was changed: put back this data directory's own copy of %s, "+
			"or move the file out of %s to go on without what it holds (the start then names any acknowledged registration that is missing, and shredd wal accept-loss records such a loss)",
			path, off, ErrWALDamaged, err, filepath.Base(path), filepath.Dir(path))
	}
	return v, nil // a torn last frame: never synced, never acknowledged
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanFrames parses the frames of a segment's bytes b, the first starting
// with sequence number first, and returns their registrations, the offset
// where it stopped (len(b) when every frame parsed) and the error there.
func scanFrames(b, key []byte, first uint64) ([]walRecord, int, error) {
	out, off, _, err := scanFramesMAC(b, key, first)
	return out, off, err
}

// scanFramesMAC is scanFrames that also returns the MAC of the last frame
// that parsed (nil for none).
func scanFramesMAC(b, key []byte, first uint64) ([]walRecord, int, []byte, error) {
	var out []walRecord
	var mac []byte
	off := 0
	for off < len(b) {
		recs, n, err := parseFrame(b[off:], key, first+uint64(len(out)))
		if err != nil {
			return out, off, mac, err
		}
		mac = b[off+frameMACOffset : off+frameHeaderSize]
		out = append(out, recs...)
		off += n
	}
	return out, off, mac, nil
}

// validFrameAfter reports whether a whole valid frame starting with
// sequence number seq begins anywhere in b.
func validFrameAfter(b, key []byte, seq uint64) bool {
	for {
		i := bytes.Index(b, []byte(walMagic))
		if i < 0 {
			return false
		}
		if recs, _, err := parseFrame(b[i:], key, 0); err == nil && recs[0].seq >= seq {
			return true
		}
		b = b[i+1:]
	}
}

// cutFile truncates path to size and syncs it.
func cutFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	return nil
}

// parseFrame parses the frame at the start of b, whose first sequence
// number must be seq (any, for 0), and returns its registrations and its
// length.
func parseFrame(b, key []byte, seq uint64) ([]walRecord, int, error) {
	if len(b) < frameHeaderSize {
		return nil, 0, errors.New("a frame header cut short")
	}
	if string(b[:4]) != walMagic {
		return nil, 0, errors.New("no frame magic")
	}
	if crc32.Checksum(b[8:frameMACOffset], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errors.New("the frame header's checksum does not match")
	}
	first := binary.LittleEndian.Uint64(b[8:])
	count := binary.LittleEndian.Uint32(b[16:])
	n := binary.LittleEndian.Uint32(b[20:])
	if seq != 0 && first != seq {
		return nil, 0, fmt.Errorf("%w: it starts at registration %d, not %d", errFrameSeq, first, seq)
	}
	if count == 0 || n > maxFrameBody || binary.LittleEndian.Uint32(b[28:]) != 0 {
		return nil, 0, errors.New("a frame header out of range")
	}
	if len(b)-frameHeaderSize < int(n) {
		return nil, 0, errors.New("a frame body cut short")
	}
	body := b[frameHeaderSize : frameHeaderSize+int(n)]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[24:]) {
		return nil, 0, errors.New("the frame body's checksum does not match")
	}
	if !hmac.Equal(frameMAC(key, b, body), b[frameMACOffset:frameHeaderSize]) {
		return nil, 0, errFrameMAC
	}
	out := make([]walRecord, 0, count)
	for i := range count {
		l, k := uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, 0, errors.New("a registration's length out of range")
		}
		reg, err := decodeRegistration(body[k : k+int(l)])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, walRecord{seq: first + uint64(i), reg: reg})
		body = body[k+int(l):]
	}
	if len(body) != 0 {
		return nil, 0, errors.New("bytes after the frame's registrations")
	}
	return out, frameHeaderSize + int(n), nil
}

// appendFrame encodes regs as one frame starting at sequence number first,
// appended to buf.
func appendFrame(buf, key []byte, first uint64, regs []*Registration) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeaderSize)...)
	var one []byte
	for _, r := range regs {
		one = encodeRegistration(one[:0], r)
		buf = binary.AppendUvarint(buf, uint64(len(one)))
		buf = append(buf, one...)
	}
	h := buf[start : start+frameHeaderSize]
	body := buf[start+frameHeaderSize:]
	copy(h, walMagic)
	binary.LittleEndian.PutUint64(h[8:], first)
	binary.LittleEndian.PutUint32(h[16:], uint32(len(regs)))
	binary.LittleEndian.PutUint32(h[20:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[24:], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[8:frameMACOffset], castagnoli))
	copy(h[frameMACOffset:], frameMAC(key, h, body))
	return buf
}

// encodeRegistration appends r: id, flags (1: sealed), time (Unix ns),
// kind, holder, parents, and the lineage refs each with its direct flag.
func encodeRegistration(b []byte, r *Registration) []byte {
	b = append(b, r.ID[:]...)
	var flags byte
	if r.Sealed {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.At.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(r.Kind)))
	b = append(b, r.Kind...)
	b = binary.AppendUvarint(b, uint64(len(r.Holder)))
	b = append(b, r.Holder...)
	b = binary.AppendUvarint(b, uint64(len(r.Parents)))
	for _, p := range r.Parents {
		b = append(b, p[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Lineage)))
	for _, ref := range r.Lineage {
		b = append(b, ref.SID[:]...)
		b = binary.LittleEndian.AppendUint32(b, ref.Gen)
		var d byte
		if r.Direct[ref.SID] {
			d = 1
		}
		b = append(b, d)
	}
	return b
}

// decodeRegistration is encodeRegistration's inverse.
func decodeRegistration(b []byte) (Registration, error) {
	var r Registration
	d := decoder{b: b}
	copy(r.ID[:], d.take(len(r.ID)))
	flags := d.take(1)
	at := d.take(8)
	kind := d.take(d.count(1))
	holder := d.take(d.count(1))
	np := d.count(len(shredd.ID{}))
	for range np {
		var p shredd.ID
		copy(p[:], d.take(len(p)))
		r.Parents = append(r.Parents, p)
	}
	const refSize = len(envelope.SID{}) + 4 + 1
	nl := d.count(refSize)
	for range nl {
		var ref envelope.Ref
		copy(ref.SID[:], d.take(len(ref.SID)))
		g := d.take(4)
		dir := d.take(1)
		if d.err != nil {
			break
		}
		ref.Gen = binary.LittleEndian.Uint32(g)
		if dir[0] > 1 || slices.ContainsFunc(r.Lineage, func(o envelope.Ref) bool { return o.SID == ref.SID }) {
			d.err = errors.New("a direct flag out of range or a subject twice")
			break
		}
		if dir[0] == 1 {
			if r.Direct == nil {
				r.Direct = map[envelope.SID]bool{}
			}
			r.Direct[ref.SID] = true
		}
		r.Lineage = append(r.Lineage, ref)
	}
	if d.err != nil || len(d.b) != 0 || flags[0]&^1 != 0 {
		return Registration{}, errors.New("a registration that does not parse")
	}
	r.Sealed = flags[0]&1 != 0
	r.At = time.Unix(0, int64(binary.LittleEndian.Uint64(at))).UTC()
	r.Kind, r.Holder = string(kind), string(holder)
	return r, nil
}

// uvarint is binary.Uvarint refusing the longer spellings of a number
// (one encoding per registration).
func uvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 0 && k != len(binary.AppendUvarint(nil, v)) {
		return 0, -1
	}
	return v, k
}

// decoder reads a registration's fields; the first short read sets err
// and every later read returns zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errors.New("short")
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

// count reads a uvarint count of items of at least size bytes each that
// the rest can hold.
func (d *decoder) count(size int) int {
	if d.err != nil {
		return 0
	}
	v, k := uvarint(d.b)
	if k <= 0 || v > uint64(len(d.b)-k)/uint64(size) {
		d.err = errors.New("count out of range")
		return 0
	}
	d.b = d.b[k:]
	return int(v)
}

// append writes frame (n registrations from w.next on) to the segment
// being appended to, starting a new segment first when there is none yet
// or the current one is full, and fdatasyncs it: when append returns nil
// the registrations are durable. After a failed write or sync the WAL
// refuses every later append (what reached the disk is unknown, and a
// later sync would not say); the registry then answers 503 until a
// restart reads the WAL back.
func (w *wal) append(frame []byte, n int) error {
	if w.broken != nil {
		return w.broken
	}
	if w.f == nil || w.size >= w.segBytes {
		if err := w.rotate(); err != nil {
			w.broken = err
			return err
		}
	}
	if err := w.prezero(int64(len(frame))); err != nil {
		w.broken = err
		return err
	}
	if _, err := w.f.WriteAt(frame, w.size); err != nil {
		w.broken = fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
		return w.broken
	}
	crashpoint.Hit("wal:appended") // written, not yet synced
	if err := fdatasync(w.f); err != nil {
		w.broken = fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
		return w.broken
	}
	crashpoint.Hit("wal:synced") // durable, not yet answered
	w.size += int64(len(frame))
	w.next += uint64(n)
	w.lastMAC = append(w.lastMAC[:0], frame[frameMACOffset:frameHeaderSize]...)
	cur := &w.segs[len(w.segs)-1]
	cur.last, cur.size = w.next-1, w.size
	return nil
}

// walZeroStep is how far ahead of its frames a segment is written with
// zeros (prezero).
const walZeroStep = 1 << 20

// prezero makes sure the next n bytes of the segment lie in its zeroed
// part, writing the next walZeroStep bytes (at least n) with zeros when
// they do not. A frame then overwrites blocks that the file already has,
// within its size, so the group's fdatasync writes the frame's pages and
// nothing of the file system's journal: appending past the end would
// change the file's size and blocks with every group, and each fdatasync
// would commit the journal too (on ext4 a second write to the device,
// behind every other file's pending data). The zeros reach the disk with
// the next group's fdatasync, once per walZeroStep bytes of frames. A
// reader takes the zeros after a segment's last frame for its end
// (readSegment).
func (w *wal) prezero(n int64) error {
	if w.size+n <= w.zeroed {
		return nil
	}
	step := max(int64(walZeroStep), n)
	if _, err := w.f.WriteAt(make([]byte, step), w.zeroed); err != nil {
		return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
	}
	w.zeroed += step
	return nil
}

// cutZeros cuts the zeros after the frames of the segment being appended
// to (prezero), durably.
func (w *wal) cutZeros() error {
	if w.zeroed <= w.size {
		return nil
	}
	if err := w.f.Truncate(w.size); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.zeroed = w.size
	return nil
}

// rotate closes the segment being appended to (it is synced), cut to its
// frames, and creates the next one, named for w.next, durably.
func (w *wal) rotate() error {
	if w.f != nil {
		if err := w.cutZeros(); err != nil {
			return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
		}
		if err := w.f.Close(); err != nil {
			return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
		}
		w.f = nil
	}
	path := filepath.Join(w.dir, segName(w.next))
	if n := len(w.segs); n > 0 && w.segs[n-1].path == path && w.segs[n-1].last+1 == w.segs[n-1].first {
		// A segment with no frame, named for the next registration: a
		// process that died between creating it and its first frame made
		// it. Append to it, rather than fail to create it again.
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			err = f.Truncate(0)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
		}
		w.f, w.size, w.zeroed = f, 0, 0
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
	}
	if err := datadir.SyncDir(w.dir); err != nil {
		f.Close()
		return fmt.Errorf("registry: wal: %w: %w", shredd.ErrUnavailable, err)
	}
	w.f, w.size, w.zeroed = f, 0, 0
	w.segs = append(w.segs, walSegment{path: path, first: w.next, last: w.next - 1})
	return nil
}

// retainedFrom returns the sequence number up to which folded segments
// (registrations up to upTo) exceed retain bytes when kept from the newest
// back: the segments through it may go even though no backup covers them.
// 0 when all of them fit.
func (w *wal) retainedFrom(upTo uint64, retain int64) uint64 {
	var kept int64
	for i := len(w.segs) - 1; i >= 0; i-- {
		s := w.segs[i]
		if s.last > upTo || (w.f != nil && i == len(w.segs)-1) {
			continue
		}
		if kept += s.size; kept > retain {
			return s.last
		}
	}
	return 0
}

// removeThrough removes the segments, other than the one being appended
// to, whose registrations all have sequence numbers up to seq, and
// reports how many it removed.
func (w *wal) removeThrough(seq uint64) (int, error) {
	n := 0
	for len(w.segs) > 0 {
		s := w.segs[0]
		if s.last > seq || (w.f != nil && len(w.segs) == 1) {
			break
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("registry: wal: %w", err)
		}
		w.segs = w.segs[1:]
		n++
	}
	if n > 0 {
		if err := datadir.SyncDir(w.dir); err != nil {
			return n, fmt.Errorf("registry: wal: %w", err)
		}
		crashpoint.Hit("wal:truncated") // folded segments removed
	}
	return n, nil
}

// close closes the segment being appended to.
func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	var err error
	if w.broken == nil {
		err = w.cutZeros() // a reader would skip them
	}
	err = errors.Join(err, w.f.Close())
	w.f = nil
	return err
}

// fdatasync flushes f's data (and the metadata needed to read it back,
// such as its size) to the disk.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
