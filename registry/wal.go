package registry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/ledger"
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
// The WAL is a ledger.Segments log in wal/ (its format is written there):
// one frame a group of registrations, a record a registration
// (encodeRegistration), under the WAL key (WALKey, derived from the
// subject secret); a frame shredd did not write (a planted or edited
// segment) is refused instead of registered.

const (
	// LabelWAL derives the registration WAL's MAC key from the subject
	// secret (WALKey).
	LabelWAL = "shredd/v1/registration-wal"
	// DefaultSegmentBytes is the size past which the WAL starts a new
	// segment.
	DefaultSegmentBytes = ledger.DefaultSegmentBytes
	// WALDir is the WAL's folder in the data directory.
	WALDir = "wal"
)

// ErrWALDamaged means the registration WAL holds a damaged frame that a
// later frame follows: registrations that were acknowledged can no longer
// be read, and the registry refuses to open rather than lose them
// silently. docs/operations.md says what to do.
var ErrWALDamaged = errors.New("registration WAL damaged")

// WALKey derives the registration WAL's MAC key from the subject secret.
func WALKey(secret []byte) []byte { return ledger.MACKey(secret, LabelWAL) }

// walConfig is the registration WAL in dir as a ledger.Segments log.
func walConfig(dir string, key []byte, segBytes int64, folded uint64) ledger.Config {
	return ledger.Config{Dir: dir, Key: key, SegmentBytes: segBytes, Name: "registration WAL", Prefix: "registry: wal",
		Damaged: ErrWALDamaged,
		LossFix: "(the start then names any acknowledged registration that is missing, and shredd wal accept-loss records such a loss)",
		Gap:     func(from, to uint64) string { return gapWarning(from, to, folded) },
		Check:   func(rec []byte) error { _, err := decodeRegistration(rec); return err }}
}

// wal is the registration WAL's files.
type wal = ledger.Segments

// walRecord is one registration read back from the WAL.
type walRecord struct {
	seq uint64
	reg Registration
}

// openWAL opens the WAL in dir (created 0700 when missing), reads every
// segment, cuts a torn last frame, and returns the registrations after
// folded (the last sequence number the tables hold), in order, with a
// warning for each thing it repaired or found missing. A damaged frame
// that a later frame follows gives ErrWALDamaged.
func openWAL(dir string, key []byte, segBytes int64, folded uint64) (*wal, []walRecord, []string, error) {
	w, recs, warnings, err := ledger.Open(walConfig(dir, key, segBytes, folded), folded)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([]walRecord, 0, len(recs))
	for _, r := range recs {
		reg, err := decodeRegistration(r.Body)
		if err != nil {
			return nil, nil, nil, err // Check passed it: never
		}
		out = append(out, walRecord{seq: r.Seq, reg: reg})
	}
	return w, out, warnings, nil
}

// Acknowledged returns the sequence number of the last registration in
// the WAL in dir (0 for none), reading it without changing anything:
// what a process beside the one that owns the WAL (shredd backup) asks
// before it waits for the fold (BackupPoint) to reach it. A frame that
// does not parse ends the reading there (it may be being written).
func Acknowledged(dir string, key []byte) (uint64, error) {
	return walConfig(dir, key, 0, 0).Acknowledged()
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

// appendFrame encodes regs as one frame starting at sequence number first,
// appended to buf.
func appendFrame(buf, key []byte, first uint64, regs []*Registration) []byte {
	return ledger.AppendFrame(buf, key, first, len(regs), func(b []byte, i int) []byte { return encodeRegistration(b, regs[i]) })
}

// encodeRegistration appends r: id, flags (1: sealed; 2: read links
// follow; 4: a writer follows), time (Unix ns), kind, holder, parents, the
// lineage refs each with its direct flag, with flag 2 the read links, each
// a lease id and how (readCodes), and with flag 4 the writer. A
// registration without either is encoded as before they existed.
func encodeRegistration(b []byte, r *Registration) []byte {
	b = append(b, r.ID[:]...)
	var flags byte
	if r.Sealed {
		flags |= 1
	}
	if len(r.Reads) > 0 {
		flags |= 2
	}
	if r.Writer != "" {
		flags |= 4
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
	if len(r.Reads) > 0 {
		b = binary.AppendUvarint(b, uint64(len(r.Reads)))
		for _, rd := range r.Reads {
			b = append(b, rd.Lease[:]...)
			b = append(b, readCode(rd.How))
		}
	}
	if r.Writer != "" {
		b = binary.AppendUvarint(b, uint64(len(r.Writer)))
		b = append(b, r.Writer...)
	}
	return b
}

// readCodes are the WAL's codes of how a write closed a read (shredd.Read).
var readCodes = []string{1: shredd.ReadNamed, 2: shredd.ReadInherited, 3: shredd.ReadIndependent}

func readCode(how string) byte {
	for i, h := range readCodes {
		if h == how && i > 0 {
			return byte(i)
		}
	}
	panic("registry: a read link of unknown kind: " + how)
}

// decodeReads reads the read links of a registration (flag 2).
func (d *decoder) reads() []shredd.Read {
	n := d.count(len(shredd.ID{}) + 1)
	out := make([]shredd.Read, 0, n)
	for range n {
		var rd shredd.Read
		copy(rd.Lease[:], d.take(len(rd.Lease)))
		c := d.take(1)
		if d.err != nil {
			return nil
		}
		if c[0] == 0 || int(c[0]) >= len(readCodes) {
			d.err = errors.New("a read link of unknown kind")
			return nil
		}
		rd.How = readCodes[c[0]]
		out = append(out, rd)
	}
	if n == 0 {
		d.err = errors.New("flag 2 without read links")
	}
	return out
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
	if d.err == nil && flags[0]&2 != 0 {
		r.Reads = d.reads()
	}
	if d.err == nil && flags[0]&4 != 0 {
		if r.Writer = string(d.take(d.count(1))); r.Writer == "" {
			d.err = errors.New("flag 4 without a writer")
		}
	}
	if d.err != nil || len(d.b) != 0 || flags[0]&^7 != 0 {
		return Registration{}, errors.New("a registration that does not parse")
	}
	r.Sealed = flags[0]&1 != 0
	r.At = time.Unix(0, int64(binary.LittleEndian.Uint64(at))).UTC()
	r.Kind, r.Holder = string(kind), string(holder)
	return r, nil
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
	v, k := ledger.Uvarint(d.b)
	if k <= 0 || v > uint64(len(d.b)-k)/uint64(size) {
		d.err = errors.New("count out of range")
		return 0
	}
	d.b = d.b[k:]
	return int(v)
}
