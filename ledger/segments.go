package ledger

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

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
)

// Segments is a log of numbered records in segment files (the
// registration WAL's format, docs/design.md "The registration WAL"). A
// segment is a file <first sequence number, 16 hex digits>.seg of frames,
// each one group of records:
//
//	magic "SRW1" | header CRC | first seq u64 | count u32 | body length u32 | body CRC | 0 u32 | MAC (16 bytes)
//	body: count times (uvarint length | record)
//
// then, in the segment being appended to, zeros (prezero); little-endian,
// CRC-32C; the header CRC covers the header's bytes after it up to the
// MAC. The MAC is HMAC-SHA256 under the log's key, cut to 16 bytes, over
// the first 32 bytes of the header and the body: the CRCs tell a torn
// write, the MAC a frame shredd did not write (a planted or edited
// segment), which is refused. Sequence numbers run on from frame to frame
// and from segment to segment. A frame is written only after the previous
// one was synced, so only the last frame of the last segment can be torn
// (written in part when the process or the machine died, and never
// acknowledged). What a record holds is the user's (Config.Check).
type Segments struct {
	c      Config
	segs   []segment // in order; the last is the one appended to when f is set
	f      *os.File  // the segment being appended to, nil until the first append of this process
	size   int64     // bytes of frames in f
	zeroed int64     // bytes of f written, frames then zeros (prezero)
	next   uint64    // the sequence number of the next record
	// lastMAC is the MAC of the frame that ends at next-1; nil when no
	// segment holds it.
	lastMAC []byte
	broken  error // a write or sync failed: no more appends (its state on disk is unknown)
}

// Config is what a Segments log is: its folder, key and the words of its
// errors.
type Config struct {
	Dir string
	// Key is the MAC key (at least 32 bytes), derived by the user from
	// the subject secret.
	Key []byte
	// SegmentBytes is the size past which a new segment is started
	// (DefaultSegmentBytes when 0).
	SegmentBytes int64
	// Name names the log in warnings and errors ("registration WAL");
	// Prefix begins its errors ("registry: wal"), the words of the
	// package that returns them.
	Name, Prefix string
	// Damaged is wrapped by every refusal of a damaged log.
	Damaged error
	// LossFix is what an operator can do about the records a segment
	// moved aside held, said in the refusal of a damaged segment.
	LossFix string
	// Gap, when set, says that the records from..to-1 are in no segment
	// at open ("" for nothing to say).
	Gap func(from, to uint64) string
	// Check, when set, refuses a record that does not parse: its frame is
	// then damaged.
	Check func(rec []byte) error
}

// Record is one record read back from a Segments log. Body points into
// the segment's bytes as read.
type Record struct {
	Seq  uint64
	Body []byte
}

// segment is one segment file: the sequence numbers first..last (last =
// first-1 when it holds none).
type segment struct {
	path        string
	first, last uint64
	size        int64 // bytes
}

// SegmentCover is the run of sequence numbers one segment holds, as a
// read-only check found it (CoverOf).
type SegmentCover struct{ First, Last uint64 }

const (
	segMagic        = "SRW1"
	frameHeaderSize = 48
	frameMACOffset  = 32
	// maxFrameBody bounds a frame's body.
	maxFrameBody = 1 << 30
	// DefaultSegmentBytes is the size past which a new segment is started.
	DefaultSegmentBytes = 64 << 20
	// zeroStep is how far ahead of its frames a segment is written with
	// zeros (prezero).
	zeroStep = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errFrameMAC is a frame whose checksums hold and whose MAC does not: not
// a torn write but a frame shredd did not write.
var errFrameMAC = errors.New("the frame's MAC does not verify: shredd did not write it")

// errFrameSeq is a frame whose header checksum holds and whose sequence
// number is not the one its place in the log needs: a whole frame of
// another segment or instance, never a torn write.
var errFrameSeq = errors.New("a whole frame out of sequence: not this WAL's frame for its place")

// MACKey derives a log's MAC key from secret under label.
func MACKey(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// frameMAC is the MAC of a frame: its header's first 32 bytes and body.
func frameMAC(key, head, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(head[:frameMACOffset])
	m.Write(body)
	return m.Sum(nil)[:frameHeaderSize-frameMACOffset]
}

// errorf is an error of the log, under its prefix.
func (c *Config) errorf(format string, a ...any) error {
	return fmt.Errorf(c.Prefix+": "+format, a...)
}

// segName is the file name of the segment whose first sequence number is
// first.
func segName(first uint64) string { return fmt.Sprintf("%016x.seg", first) }

// Open opens the log in c.Dir (created 0700 when missing), reads every
// segment, cuts a torn last frame, and returns the records after `after`
// (the last sequence number its user has elsewhere), in order, with a
// warning for each thing it repaired or found missing. A damaged frame
// that a later frame follows gives c.Damaged.
func Open(c Config, after uint64) (*Segments, []Record, []string, error) {
	if len(c.Key) < 32 {
		return nil, nil, nil, c.errorf("a MAC key of %d bytes, want 32: %w", len(c.Key), shredd.ErrInvalid)
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if err := os.Mkdir(c.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, nil, nil, c.errorf("%w", err)
	}
	firsts, err := c.List()
	if err != nil {
		return nil, nil, nil, err
	}
	w := &Segments{c: c}
	for _, first := range firsts {
		w.segs = append(w.segs, segment{path: filepath.Join(c.Dir, segName(first)), first: first})
	}
	var out []Record
	var warnings []string
	expect := uint64(0) // the next sequence number a segment should start with; 0 before the first
	for i := range w.segs {
		seg := &w.segs[i]
		if expect != 0 && seg.first != expect {
			warnings = append(warnings, c.gap(expect, seg.first))
		}
		recs, err := w.readSegment(seg, i == len(w.segs)-1, &warnings)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range recs {
			if r.Seq > after {
				out = append(out, r)
			}
		}
		expect = seg.last + 1
	}
	w.next = max(expect, after+1, 1)
	if w.next != expect {
		w.lastMAC = nil // the frame that ends at next-1 is in no segment
	}
	if len(out) > 0 && out[0].Seq > after+1 {
		warnings = append(warnings, c.gap(after+1, out[0].Seq))
	}
	return w, out, slices.DeleteFunc(warnings, func(s string) bool { return s == "" }), nil
}

func (c *Config) gap(from, to uint64) string {
	if c.Gap == nil {
		return ""
	}
	return c.Gap(from, to)
}

// List checks, changing nothing, that c.Dir is the log's own directory
// (not a symlink, not writable by others) holding segments only, and
// returns their first sequence numbers in order. The open and the
// read-only check (Cover) refuse alike.
func (c Config) List() ([]uint64, error) {
	dir := c.Dir
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, c.errorf("%s: %w: not a directory (a symlink is refused): nothing was changed; put the directory itself in its place (for a symlink: rm %s, then mv the directory it named to %s)", dir, datadir.ErrUnsafe, dir, dir)
	}
	if err := datadir.CheckDir(dir); err != nil {
		return nil, c.errorf("%w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, c.errorf("%w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		first, ok := parseSegName(e.Name())
		if !ok {
			return nil, c.errorf("%s: %w: not a segment of the %s; nothing was changed: move it out of %s", e.Name(), c.Damaged, c.Name, dir)
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	return firsts, nil
}

// Cover reads every segment without changing anything, judging each as
// Open would (a damaged one is the same refusal), and returns the runs of
// sequence numbers they hold and the MAC of the frame ending at each
// segment's last record (nil for none), in order.
func (c Config) Cover() ([]SegmentCover, [][]byte, error) {
	firsts, err := c.List()
	if err != nil {
		return nil, nil, err
	}
	var cov []SegmentCover
	var macs [][]byte
	for i, first := range firsts {
		path := filepath.Join(c.Dir, segName(first))
		b, err := datadir.Read(path, datadir.Secret, 1<<40)
		if err != nil {
			return nil, nil, c.errorf("%w", err)
		}
		v, err := c.judge(path, b, first, i == len(firsts)-1)
		if err != nil {
			return nil, nil, err
		}
		cov = append(cov, SegmentCover{First: first, Last: first - 1 + uint64(len(v.recs))})
		macs = append(macs, v.mac)
	}
	return cov, macs, nil
}

// Acknowledged returns the sequence number of the last record in the log
// in c.Dir (0 for none), reading it without changing anything: what a
// process beside the one that owns the log asks. A frame that does not
// parse ends the reading there (it may be being written).
func (c Config) Acknowledged() (uint64, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, c.errorf("%w", err)
	}
	var last uint64
	for _, e := range entries {
		first, ok := parseSegName(e.Name())
		if !ok {
			continue
		}
		b, err := datadir.Read(filepath.Join(c.Dir, e.Name()), datadir.Secret, 1<<40)
		if err != nil {
			return 0, c.errorf("%w", err)
		}
		if recs, _, _, _ := c.scan(b, first); len(recs) > 0 {
			last = max(last, recs[len(recs)-1].Seq)
		}
	}
	return last, nil
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
// cut there (with a warning). Anywhere else a damaged frame is c.Damaged.
func (w *Segments) readSegment(seg *segment, last bool, warnings *[]string) ([]Record, error) {
	b, err := datadir.Read(seg.path, datadir.Secret, 1<<40)
	if err != nil {
		return nil, w.c.errorf("%w", err)
	}
	v, err := w.c.judge(seg.path, b, seg.first, last)
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
	if err := CutFile(seg.path, int64(v.end)); err != nil {
		return nil, w.c.errorf("%w", err)
	}
	if !v.zeros {
		*warnings = append(*warnings, fmt.Sprintf("%s: cut a torn last frame of %d bytes from %s (never acknowledged)", w.c.Name, len(b)-v.end, filepath.Base(seg.path)))
	}
	return v.recs, nil
}

// verdict is what judge found in a segment's bytes.
type verdict struct {
	recs  []Record
	end   int    // where its whole frames end: the rest is cut at open
	mac   []byte // the last whole frame's MAC; nil for none
	zeros bool   // what follows end is the zeros written ahead (prezero), not a torn frame
}

// judge reads the frames of a segment's bytes b without changing
// anything. In the last segment (last) a damaged frame that no valid
// frame follows is a torn write, to be cut at end; the zeros written
// ahead of the frames are its end too. Anywhere else a damaged frame, a
// whole frame out of sequence or a frame whose MAC does not verify is
// c.Damaged, naming the file and the fix.
func (c *Config) judge(path string, b []byte, first uint64, last bool) (verdict, error) {
	out, off, mac, err := c.scan(b, first)
	v := verdict{recs: out, end: off, mac: mac}
	if err == nil {
		return v, nil
	}
	if allZero(b[off:]) {
		v.zeros = true
		return v, nil
	}
	if !last || errors.Is(err, errFrameMAC) || errors.Is(err, errFrameSeq) || c.validFrameAfter(b[off+1:], first+uint64(len(out))) {
		return v, c.errorf("%s at byte %d: %w: %v; nothing was changed: put back this data directory's own copy of %s, "+
			"or move the file out of %s to go on without what it holds %s",
			path, off, c.Damaged, err, filepath.Base(path), filepath.Dir(path), c.LossFix)
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

// scan parses the frames of a segment's bytes b, the first starting with
// sequence number first, and returns their records, the offset where it
// stopped (len(b) when every frame parsed), the MAC of the last frame
// that parsed (nil for none) and the error there.
func (c *Config) scan(b []byte, first uint64) ([]Record, int, []byte, error) {
	var out []Record
	var mac []byte
	off := 0
	for off < len(b) {
		recs, n, err := c.parseFrame(b[off:], first+uint64(len(out)))
		if err != nil {
			return out, off, mac, err
		}
		mac = b[off+frameMACOffset : off+frameHeaderSize]
		out = append(out, recs...)
		off += n
	}
	return out, off, mac, nil
}

// Scan is scan for the tests of the log's users: the records of the
// segment bytes b whose first sequence number is first, and the offset
// where its whole frames end.
func (c Config) Scan(b []byte, first uint64) ([]Record, int, error) {
	out, off, _, err := c.scan(b, first)
	return out, off, err
}

// validFrameAfter reports whether a whole valid frame starting with
// sequence number seq begins anywhere in b.
func (c *Config) validFrameAfter(b []byte, seq uint64) bool {
	for {
		i := bytes.Index(b, []byte(segMagic))
		if i < 0 {
			return false
		}
		if recs, _, err := c.parseFrame(b[i:], 0); err == nil && recs[0].Seq >= seq {
			return true
		}
		b = b[i+1:]
	}
}

// parseFrame parses the frame at the start of b, whose first sequence
// number must be seq (any, for 0), and returns its records and its
// length.
func (c *Config) parseFrame(b []byte, seq uint64) ([]Record, int, error) {
	if len(b) < frameHeaderSize {
		return nil, 0, errors.New("a frame header cut short")
	}
	if string(b[:4]) != segMagic {
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
	if !hmac.Equal(frameMAC(c.Key, b, body), b[frameMACOffset:frameHeaderSize]) {
		return nil, 0, errFrameMAC
	}
	out := make([]Record, 0, count)
	for i := range count {
		l, k := Uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, 0, errors.New("a registration's length out of range")
		}
		rec := body[k : k+int(l)]
		if c.Check != nil {
			if err := c.Check(rec); err != nil {
				return nil, 0, err
			}
		}
		out = append(out, Record{Seq: first + uint64(i), Body: rec})
		body = body[k+int(l):]
	}
	if len(body) != 0 {
		return nil, 0, errors.New("bytes after the frame's registrations")
	}
	return out, frameHeaderSize + int(n), nil
}

// AppendFrame encodes n records as one frame starting at sequence number
// first, appended to buf: enc appends record i to its argument.
func AppendFrame(buf, key []byte, first uint64, n int, enc func(b []byte, i int) []byte) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeaderSize)...)
	var one []byte
	for i := range n {
		one = enc(one[:0], i)
		buf = binary.AppendUvarint(buf, uint64(len(one)))
		buf = append(buf, one...)
	}
	h := buf[start : start+frameHeaderSize]
	body := buf[start+frameHeaderSize:]
	copy(h, segMagic)
	binary.LittleEndian.PutUint64(h[8:], first)
	binary.LittleEndian.PutUint32(h[16:], uint32(n))
	binary.LittleEndian.PutUint32(h[20:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[24:], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[8:frameMACOffset], castagnoli))
	copy(h[frameMACOffset:], frameMAC(key, h, body))
	return buf
}

// Uvarint is binary.Uvarint refusing the longer spellings of a number
// (one encoding per record).
func Uvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 0 && k != len(binary.AppendUvarint(nil, v)) {
		return 0, -1
	}
	return v, k
}

// Next is the sequence number of the next record.
func (w *Segments) Next() uint64 { return w.next }

// LastMAC is the MAC of the frame that ends at Next()-1; nil when no
// segment holds it.
func (w *Segments) LastMAC() []byte { return w.lastMAC }

// Broken is the failure that stopped the appends; nil while it works.
func (w *Segments) Broken() error { return w.broken }

// Key is the log's MAC key.
func (w *Segments) Key() []byte { return w.c.Key }

// Append writes frame (n records from Next() on) to the segment being
// appended to, starting a new segment first when there is none yet or the
// current one is full, and fdatasyncs it: when Append returns nil the
// records are durable. After a failed write or sync the log refuses every
// later append (what reached the disk is unknown, and a later sync would
// not say); its user then answers 503 until a restart reads it back.
func (w *Segments) Append(frame []byte, n int) error {
	if w.broken != nil {
		return w.broken
	}
	if w.f == nil || w.size >= w.c.SegmentBytes {
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
		w.broken = w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
		return w.broken
	}
	crashpoint.Hit("wal:appended") // written, not yet synced
	if err := Fdatasync(w.f); err != nil {
		w.broken = w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
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

// prezero makes sure the next n bytes of the segment lie in its zeroed
// part, writing the next zeroStep bytes (at least n) with zeros when they
// do not. A frame then overwrites blocks that the file already has, within
// its size, so the group's fdatasync writes the frame's pages and nothing
// of the file system's journal: appending past the end would change the
// file's size and blocks with every group, and each fdatasync would commit
// the journal too (on ext4 a second write to the device, behind every
// other file's pending data). The zeros reach the disk with the next
// group's fdatasync, once per zeroStep bytes of frames. A reader takes
// the zeros after a segment's last frame for its end (readSegment).
func (w *Segments) prezero(n int64) error {
	if w.size+n <= w.zeroed {
		return nil
	}
	step := max(int64(zeroStep), n)
	if _, err := w.f.WriteAt(make([]byte, step), w.zeroed); err != nil {
		return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	w.zeroed += step
	return nil
}

// cutZeros cuts the zeros after the frames of the segment being appended
// to (prezero), durably.
func (w *Segments) cutZeros() error {
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
func (w *Segments) rotate() error {
	if w.f != nil {
		if err := w.cutZeros(); err != nil {
			return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
		}
		if err := w.f.Close(); err != nil {
			return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
		}
		w.f = nil
	}
	path := filepath.Join(w.c.Dir, segName(w.next))
	if n := len(w.segs); n > 0 && w.segs[n-1].path == path && w.segs[n-1].last+1 == w.segs[n-1].first {
		// A segment with no frame, named for the next record: a process
		// that died between creating it and its first frame made it.
		// Append to it, rather than fail to create it again.
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			err = f.Truncate(0)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
		}
		w.f, w.size, w.zeroed = f, 0, 0
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	if err := datadir.SyncDir(w.c.Dir); err != nil {
		f.Close()
		return w.c.errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	w.f, w.size, w.zeroed = f, 0, 0
	w.segs = append(w.segs, segment{path: path, first: w.next, last: w.next - 1})
	return nil
}

// RetainedFrom returns the sequence number up to which segments whose
// records are all up to upTo exceed retain bytes when kept from the
// newest back: the segments through it may go. 0 when all of them fit.
func (w *Segments) RetainedFrom(upTo uint64, retain int64) uint64 {
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

// Removable reports whether RemoveThrough(upTo) would remove a segment.
func (w *Segments) Removable(upTo uint64) bool {
	return len(w.segs) > 0 && w.segs[0].last <= upTo && (w.f == nil || len(w.segs) > 1)
}

// RemoveThrough removes the segments, other than the one being appended
// to, whose records all have sequence numbers up to seq, and reports how
// many it removed.
func (w *Segments) RemoveThrough(seq uint64) (int, error) {
	n := 0
	for len(w.segs) > 0 {
		s := w.segs[0]
		if s.last > seq || (w.f != nil && len(w.segs) == 1) {
			break
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, w.c.errorf("%w", err)
		}
		w.segs = w.segs[1:]
		n++
	}
	if n > 0 {
		if err := datadir.SyncDir(w.c.Dir); err != nil {
			return n, w.c.errorf("%w", err)
		}
		crashpoint.Hit("wal:truncated") // removed segments
	}
	return n, nil
}

// Close closes the segment being appended to.
func (w *Segments) Close() error {
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
