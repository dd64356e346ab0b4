package ledger

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
)

// Lines is the forget ledger's format (docs/operations.md, "The forget
// ledger"): one header line, then one chained, authenticated JSON line per
// committed forget. erasure writes it and recovers from it (erasure's
// Recovery); this file holds the format, its reservation and its repair
// of a damaged tail, and knows nothing of what a forget does.

// Domain-separation labels and the format of the forget ledger.
const (
	// LabelLedger is the label of the ledger's MAC key, derived from the
	// subject secret (LinesKey).
	LabelLedger = "shredd/v1/forget-ledger"
	// LabelLedgerLine is the label of a line's hash, which the next line
	// carries (the chain).
	LabelLedgerLine = "shredd/v1/forget-ledger-line"
	// LabelFingerprint is the label of a secret's fingerprint
	// (Fingerprint).
	LabelFingerprint = "shredd/v1/fingerprint"
	// LinesFormat names the ledger's format in its header line.
	LinesFormat = "shredd-forget-ledger/v2"
)

// The names of the fingerprints of a ledger header (Fingerprint's name).
const (
	FingerprintSubjectKey     = "subject-key"
	FingerprintRoot           = "root"
	FingerprintLogKey         = "log-key"
	FingerprintAttestationKey = "attestation-key"
)

// Fingerprint is the fingerprint of a secret named name (such as
// FingerprintSubjectKey): the hex SHA-256 of LabelFingerprint, name and
// content, each but the last followed by a zero byte. It identifies the
// secret without revealing it.
func Fingerprint(name string, content []byte) string {
	h := sha256.New()
	h.Write([]byte(LabelFingerprint))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// Fingerprints are the fingerprints (Fingerprint) of the secrets the
// data depends on, recorded in the ledger's header when it is created. An
// empty field was not known then and is not compared.
type Fingerprints struct {
	SubjectKey     string `json:"subject_key,omitempty"`
	Root           string `json:"root,omitempty"`
	LogKey         string `json:"log_key,omitempty"`
	AttestationKey string `json:"attestation_key,omitempty"`
}

// Compaction records, in the header of a compacted ledger, the lines
// compaction dropped: a compacted ledger is told apart from a deleted or
// truncated one, and its chain still verifies from the last dropped line.
type Compaction struct {
	Lines uint64 `json:"lines"`           // lines dropped, over every compaction
	Seq   uint64 `json:"seq"`             // the last dropped line's sequence number
	Head  string `json:"head"`            // its hash: the next line's prev
	Until int64  `json:"committed_until"` // the newest commit time (ns) among them
	// Below is the root version below which the dropped lines' keys were
	// destroyed by an epoch (the root's oldest version then): a root file
	// that still holds a version below it is older than the ledger, and
	// would open what those forgets destroyed. 0 in ledgers compacted by
	// releases before 2026-12.
	Below int `json:"root_below,omitempty"`
}

// Header is the first line of a ledger: its format, its random
// instance identity, when it was created, the fingerprints of the secrets
// present then, and what compaction dropped. It is authenticated like the
// lines, and its hash is the first line's prev.
type Header struct {
	Format       string       `json:"format"`
	Instance     string       `json:"instance"`
	CreatedAt    int64        `json:"created_at"`
	Fingerprints Fingerprints `json:"fingerprints"`
	Compacted    *Compaction  `json:"compacted,omitempty"`
	MAC          string       `json:"mac,omitempty"`
}

// Options configures OpenLines.
type Options struct {
	// Fingerprints are those of the secrets present: written into a new
	// ledger's header, compared with an existing one's.
	Fingerprints Fingerprints
	// AcceptLoss lets erasure's Recovery.ReconcileLedger drop a damaged tail even when the
	// database lacks forgets it may have held (shredd ledger repair
	// --accept-loss); without it such a start is refused.
	AcceptLoss bool
}

// Lines is the durable trace every forget leaves outside the database: an
// append-only file of one header line and then one line per committed
// forget (its id, sid, key generation, times, commitment and the root
// version it was committed under), fsynced before the forget is answered.
// A database restored from a backup lacks the forgets committed after the
// backup; erasure's Recovery.ReconcileLedger finds them in the ledger and commits them again,
// so a restore never brings a forgotten subject back. The file names no
// raw subject id (sids are keyed hashes, as in the database).
//
// Every line is authenticated (HMAC-SHA256 under LinesKey) and chained:
// it carries its sequence number and the hash of the line before it, the
// first one the header's. Truncation inside a line, edits and reordering
// break the chain; with the local root the head (the last line's number
// and hash) is also kept in the root file (KeepHead), where a restore
// of the database cannot roll it back, so that lines cut at a line's end,
// or a ledger replaced, are seen too. A root store that keeps forget
// records (keystore.RecordKeeper: Vault) keeps no head: the records hold
// every committed forget, so a ledger cut, rolled back or copied to another
// data directory is repaired from them and the database, and nothing per
// data directory is kept with the root. A damaged tail is never dropped in
// silence (erasure's Recovery.ReconcileLedger).
//
// Space for the next lines is reserved (fallocate) before a forget
// commits: a full disk refuses the forget (shredd.ErrDiskFull) rather than
// committing it and then failing to record it.
//
// Entries under a root version the root store has since destroyed are
// never needed again (a backup older than that version is refused), and
// Compact drops them.
type Lines struct {
	path string
	key  []byte
	opts Options

	mu        sync.Mutex // guards everything below but the sync and head state
	f         *os.File
	header    *Header            // nil: a new (empty) file, or a damaged header
	ids       map[shredd.ID]bool // forgets durably in the ledger
	seq       uint64             // the last intact line's sequence number
	head      string             // its hash (the header's, or the compaction's, before any line)
	lines     uint64             // intact lines in the file
	size      int64              // bytes of the intact part; writes go here
	damage    *Scan              // the scan that found a damaged tail, until erasure's Recovery.ReconcileLedger repairs it
	checked   bool               // erasure's Recovery.ReconcileLedger found the ledger whole, or repaired it: its head may be kept
	written   uint64             // appends written to f
	allocated int64              // the file's blocks are reserved up to here
	pending   int                // reservations not yet used or released
	noFalloc  bool               // the file system does not reserve (EOPNOTSUPP)

	// Concurrent appends share fsyncs: each waits until an fsync that began
	// after its write has returned (group commit).
	syncMu sync.Mutex
	synced uint64 // appends known durable; guarded by syncMu

	headMu sync.Mutex // serialises KeepHead
	kept   *Head      // the head last kept with the root by this process

	errMu   sync.Mutex
	lastErr error // the last append's failure, nil once one succeeds (WriteErr)
}

// WriteErr returns the error of the last append that failed, or nil when
// the last one succeeded (or none was made): GET /readyz answers 503 while
// the ledger does not take its lines.
func (l *Lines) WriteErr() error {
	if l == nil {
		return nil
	}
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.lastErr
}

func (l *Lines) setWriteErr(err error) error {
	l.errMu.Lock()
	l.lastErr = err
	l.errMu.Unlock()
	return err
}

// Line is one line of the ledger file. Seq and Forget come first: a
// line torn by a crash still names its forget in all but its first bytes.
type Line struct {
	Seq         uint64 `json:"seq"`
	Forget      string `json:"forget"`
	SID         string `json:"sid"`
	Gen         uint32 `json:"gen"`
	RequestedAt int64  `json:"requested_at"`
	CommittedAt int64  `json:"committed_at"`
	Deadline    int64  `json:"deadline"`
	Commitment  string `json:"commitment,omitempty"`
	RootVersion int    `json:"root_version"`
	LogSize     int64  `json:"log_size,omitempty"` // the transparency log's size when the forget was answered
	Prev        string `json:"prev"`               // the previous line's hash
	MAC         string `json:"mac,omitempty"`
}

// lineV1 is a line of the first format (no header, no chain), read
// once to convert the file.
type lineV1 struct {
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

// maxLedgerLine bounds one line (they are about 450 bytes): the unit of
// the space reserved ahead.
const maxLedgerLine = 1024

// reserveAhead is how much is reserved at once beyond what the pending
// forgets need.
const reserveAhead = 8 << 10

// LinesKey derives the ledger's MAC key from the subject secret.
func LinesKey(secret []byte) []byte { return MACKey(secret, LabelLedger) }

func (l *Lines) macOf(v any) string {
	b, _ := json.Marshal(v)
	m := hmac.New(sha256.New, l.key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

func (l *Lines) mac(e Line) string { e.MAC = ""; return l.macOf(e) }

func (l *Lines) macV1(e lineV1) string { e.MAC = ""; return l.macOf(e) }

func (l *Lines) macHeader(h Header) string {
	h.MAC = ""
	return l.macOf(h)
}

// lineHash is the hash of one line's bytes (without its newline).
func lineHash(b []byte) string {
	h := sha256.New()
	h.Write([]byte(LabelLedgerLine))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// OpenLines opens (creating, mode 0600) the ledger file at path. The file
// is never followed through a symlink. A ledger of the first format (no
// header) is converted. A header whose fingerprints differ from
// opts.Fingerprints is refused (ErrLedger, naming the secret). A damaged
// tail is not an error here: erasure's Recovery.ReconcileLedger decides, and appends are
// refused until it has.
func OpenLines(path string, key []byte, opts Options) (*Lines, error) {
	f, err := openLedgerFile(path)
	if err != nil {
		return nil, err
	}
	l := &Lines{path: path, key: key, opts: opts, f: f}
	if err := l.load(); err != nil {
		f.Close()
		return nil, err
	}
	if err := l.checkFingerprints(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// openLedgerFile opens (creating, mode 0600) the ledger file for reading
// and appending, never through a symlink, and checks that it is a regular
// file only its owner can read and write.
func openLedgerFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", shredd.ErrLedger, path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("%w: %s must be a regular file only its owner can read and write (chmod 600)", shredd.ErrLedger, path)
	}
	return f, nil
}

// load reads the file and sets the ledger's state from its scan. Called
// with mu held (or before sharing).
func (l *Lines) load() error {
	b, err := readAll(l.f)
	if err != nil {
		return err
	}
	sc, err := l.scan(b)
	if err != nil {
		return err
	}
	if sc.V1 != nil {
		if err := l.convertV1(sc.V1); err != nil {
			return err
		}
		return l.load()
	}
	l.apply(&sc)
	return nil
}

// apply sets the ledger's state from a scan of its file.
func (l *Lines) apply(sc *Scan) {
	l.header, l.seq, l.head, l.size = sc.Header, sc.seq, sc.head, sc.end
	l.lines = uint64(len(sc.Lines))
	l.ids = make(map[shredd.ID]bool, len(sc.Lines))
	for _, e := range sc.Lines {
		id, _ := shredd.ParseID(e.Forget)
		l.ids[id] = true
	}
	l.damage = nil
	if len(sc.Damaged) > 0 {
		l.damage = sc
	}
}

func readAll(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	return b, nil
}

// checkFingerprints refuses a header written with other secrets than
// those present.
func (l *Lines) checkFingerprints() error {
	if l.header == nil {
		return nil
	}
	have, want := l.header.Fingerprints, l.opts.Fingerprints
	for _, c := range []struct{ name, file, have, want string }{
		{"subject key", "subject.key", have.SubjectKey, want.SubjectKey},
		{"root", "the root (root.key, or the Vault Transit key)", have.Root, want.Root},
		{"log key", "log.key", have.LogKey, want.LogKey},
		{"attestation key", "attestation.key", have.AttestationKey, want.AttestationKey},
	} {
		if c.have != "" && c.want != "" && c.have != c.want {
			return fmt.Errorf("%w: %s was written with another %s (fingerprint %.16s…, now %.16s…): restore %s from where docs/operations.md (\"Files\") says to keep it; a new one opens none of the data the ledger describes",
				shredd.ErrLedger, l.path, c.name, c.have, c.want, c.file)
		}
	}
	return nil
}

// Header returns the ledger's header, and false when it has none yet (a
// new file) or its header is damaged.
func (l *Lines) Header() (Header, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.header == nil {
		return Header{}, false
	}
	return *l.header, true
}

// Head returns the ledger's head: its instance, last sequence number and
// hash, and lines. False when it has no header yet, or a damaged tail.
func (l *Lines) Head() (Head, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.headLocked()
}

func (l *Lines) headLocked() (Head, bool) {
	if l.header == nil || l.damage != nil {
		return Head{}, false
	}
	return Head{Instance: l.header.Instance, Seq: l.seq, Hash: l.head, Lines: l.lines}, true
}

// Path returns the ledger's file.
func (l *Lines) Path() string { return l.path }

// Has reports whether the ledger holds the forget.
func (l *Lines) Has(id shredd.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id]
}

// Len returns the number of forgets in the ledger (compacted ones left
// out).
func (l *Lines) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// Close closes the file.
func (l *Lines) Close() error { return l.f.Close() }

// Scan is what a read of the file found: the header, the intact
// chain of lines, and the damaged tail after it.
type Scan struct {
	Header     *Header // nil: a new file, or a damaged header
	headerHash string
	Lines      []Line   // the intact chain
	hashes     []string // of lines
	seq        uint64
	head       string
	end        int64         // bytes of the header and the intact lines
	Damaged    []DamagedLine // the damaged tail after it
	size       int64         // bytes in the file
	V1         []lineV1      // a file of the first format
}

// DamagedLine is a line of a ledger's damaged tail, as far as it can be
// read.
type DamagedLine struct {
	Offset    int64  // where it starts in the file
	Seq       uint64 // the sequence number it claims; 0 when unreadable
	Forget    string // the forget id it names (authenticated when Authentic); "" when unreadable
	Authentic bool   // its MAC verifies: only its place in the chain is wrong
	Torn      bool   // it has no end of line: a write a crash interrupted, or a cut
	Reason    string

	line *Line // when Authentic
	id   shredd.ID
}

var forgetRE = regexp.MustCompile(`"forget":"([0-9a-f]{32})"`)

// scan reads b as a ledger file. It fails only on a file of the first
// format with a line that does not verify.
func (l *Lines) scan(b []byte) (Scan, error) {
	sc := Scan{size: int64(len(b))}
	type piece struct {
		b    []byte
		off  int64
		torn bool
	}
	var ps []piece
	for off := 0; off < len(b); {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			ps = append(ps, piece{b[off:], int64(off), true})
			break
		}
		ps = append(ps, piece{b[off : off+i], int64(off), false})
		off += i + 1
	}
	if len(ps) == 0 {
		return sc, nil // a new file
	}
	var h Header
	if !ps[0].torn && json.Unmarshal(ps[0].b, &h) == nil && h.Format == LinesFormat && hmac.Equal([]byte(h.MAC), []byte(l.macHeader(h))) && canonical(h, ps[0].b) {
		sc.Header, sc.headerHash = &h, lineHash(ps[0].b)
	} else if v1, ok, err := l.scanV1(b); ok {
		sc.V1 = v1
		return sc, err
	} else {
		// The header is damaged: nothing after it can be placed.
		for _, p := range ps {
			sc.Damaged = append(sc.Damaged, l.classify(p.b, p.off, p.torn))
		}
		sc.Damaged[0].Reason = "the header line is damaged: " + sc.Damaged[0].Reason
		return sc, nil
	}
	sc.end = int64(len(ps[0].b)) + 1
	sc.seq, sc.head = 0, sc.headerHash
	if c := h.Compacted; c != nil {
		sc.seq, sc.head = c.Seq, c.Head
	}
	for i, p := range ps[1:] {
		var e Line
		ok := !p.torn && json.Unmarshal(p.b, &e) == nil && hmac.Equal([]byte(e.MAC), []byte(l.mac(e))) && canonical(e, p.b) &&
			e.Seq == sc.seq+1 && e.Prev == sc.head && validLine(e)
		if !ok {
			for _, q := range ps[1+i:] {
				sc.Damaged = append(sc.Damaged, l.classify(q.b, q.off, q.torn))
			}
			break
		}
		sc.Lines = append(sc.Lines, e)
		sc.head = lineHash(p.b)
		sc.hashes = append(sc.hashes, sc.head)
		sc.seq = e.Seq
		sc.end = p.off + int64(len(p.b)) + 1
	}
	return sc, nil
}

// canonical reports whether raw is exactly the encoding of v: nothing
// added that the MAC would not cover.
func canonical(v any, raw []byte) bool {
	b, err := json.Marshal(v)
	return err == nil && bytes.Equal(b, raw)
}

func validLine(e Line) bool {
	if _, err := shredd.ParseID(e.Forget); err != nil {
		return false
	}
	s, err := hex.DecodeString(e.SID)
	return err == nil && len(s) == len(envelope.SID{})
}

// classify reads what it can of a damaged line.
func (l *Lines) classify(b []byte, off int64, torn bool) DamagedLine {
	d := DamagedLine{Offset: off, Torn: torn}
	var e Line
	switch {
	case json.Unmarshal(b, &e) == nil:
		d.Seq = e.Seq
		if hmac.Equal([]byte(e.MAC), []byte(l.mac(e))) && validLine(e) {
			d.Authentic, d.line = true, &e
			d.Reason = "authentic but out of the chain (reordered, or after a damaged or missing line)"
		} else {
			d.Reason = "its MAC does not verify (altered)"
		}
		if id, err := shredd.ParseID(e.Forget); err == nil {
			d.Forget, d.id = e.Forget, id
		}
	default:
		d.Reason = "not a whole line"
		if m := forgetRE.FindSubmatch(b); m != nil {
			if id, err := shredd.ParseID(string(m[1])); err == nil {
				d.Forget, d.id = id.String(), id
			}
		}
	}
	if torn {
		d.Reason = "torn: no end of line (a write a crash interrupted, or a cut)"
	}
	return d
}

// scanV1 reads b as a ledger of the first format: every line verifies
// (ok, err nil), or its first line does and a later one does not (ok,
// err). A last line without its newline was a write a crash interrupted
// before its fsync: it is left out, as the first format's reader did.
func (l *Lines) scanV1(b []byte) ([]lineV1, bool, error) {
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1]
	}
	var out []lineV1
	for n, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var e lineV1
		ok := json.Unmarshal(line, &e) == nil && hmac.Equal([]byte(e.MAC), []byte(l.macV1(e))) &&
			validLine(Line{Forget: e.Forget, SID: e.SID})
		if !ok {
			if n == 0 {
				return nil, false, nil
			}
			return nil, true, fmt.Errorf("%w: %s line %d does not verify (a ledger of the first format, without a chain); restore the file, or move it away to start a new one (docs/operations.md, \"The forget ledger\")", shredd.ErrLedger, l.path, n+1)
		}
		out = append(out, e)
	}
	return out, len(out) > 0, nil
}

// convertV1 rewrites a ledger of the first format as a chained one with a
// header, through a fresh file and a rename.
func (l *Lines) convertV1(v1 []lineV1) error {
	h, err := l.newHeader()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	hb := l.encodeHeader(h)
	buf.Write(hb)
	buf.WriteByte('\n')
	seq, prev := uint64(0), lineHash(hb)
	for _, o := range v1 {
		seq++
		e := Line{Seq: seq, Forget: o.Forget, SID: o.SID, Gen: o.Gen, RequestedAt: o.RequestedAt, CommittedAt: o.CommittedAt,
			Deadline: o.Deadline, Commitment: o.Commitment, RootVersion: o.RootVersion, LogSize: o.LogSize, Prev: prev}
		b := l.encodeLine(e)
		buf.Write(b)
		buf.WriteByte('\n')
		prev = lineHash(b)
	}
	return l.replaceFile(buf.Bytes())
}

// replaceFile replaces the ledger's file with b (datadir.Replace) and
// reopens it. Called with mu held (or before sharing).
func (l *Lines) replaceFile(b []byte) error {
	if err := datadir.Replace(l.path, b, datadir.Secret); err != nil {
		return diskErr(fmt.Sprintf("rewrite %s", l.path), err)
	}
	f, err := openLedgerFile(l.path)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f, l.allocated = f, 0
	return nil
}

func (l *Lines) newHeader() (Header, error) {
	inst := make([]byte, 16)
	if _, err := rand.Read(inst); err != nil {
		return Header{}, err
	}
	return Header{Format: LinesFormat, Instance: hex.EncodeToString(inst), CreatedAt: time.Now().UnixNano(), Fingerprints: l.opts.Fingerprints}, nil
}

func (l *Lines) encodeHeader(h Header) []byte {
	h.MAC = l.macHeader(h)
	b, _ := json.Marshal(h) // strings and numbers only
	return b
}

func (l *Lines) encodeLine(e Line) []byte {
	e.MAC = l.mac(e)
	b, _ := json.Marshal(e)
	return b
}

// diskErr wraps an error of a write of the ledger: a full, over-quota or
// read-only disk is shredd.ErrDiskFull (retry later), anything else
// ErrLedger.
func diskErr(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %w: %s: %v", shredd.ErrDiskFull, shredd.ErrLedger, op, err)
	}
	// Any other failure to write the ledger (EIO, EPERM on an immutable
	// file ...) is a backend that does not take the write: 503, retried,
	// never a 500 that says nothing.
	return fmt.Errorf("%w: %w: %s: %v", shredd.ErrUnavailable, shredd.ErrLedger, op, err)
}

// writeHeaderLocked starts a new (empty) file with its header, fsynced
// with its directory. Called with mu held.
func (l *Lines) writeHeaderLocked() error {
	h, err := l.newHeader()
	if err != nil {
		return err
	}
	b := append(l.encodeHeader(h), '\n')
	if err := l.f.Truncate(0); err != nil {
		return diskErr("truncate "+l.path, err)
	}
	if _, err := l.f.Write(b); err != nil {
		l.f.Truncate(0)
		return diskErr("write "+l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return diskErr("fsync "+l.path, err)
	}
	if err := datadir.SyncDir(filepath.Dir(l.path)); err != nil {
		return diskErr("fsync the directory of "+l.path, err)
	}
	crashpoint.Hit("ledger:created")
	l.header, l.seq, l.head, l.size, l.lines = &h, 0, lineHash(b[:len(b)-1]), int64(len(b)), 0
	l.ids = map[shredd.ID]bool{}
	return nil
}

// reserve makes sure the file has room for the lines of the forgets that
// may commit now, this one included, before it commits: the blocks past
// the file's end are allocated (fallocate, keeping the size), so the
// append after the commit writes into them. A full disk is
// shredd.ErrDiskFull and the forget does not commit. Every reserve is
// followed by a release.
func (l *Lines) Reserve() error {
	if err := l.reserve(); err != nil {
		return l.setWriteErr(err)
	}
	return nil
}

func (l *Lines) reserve() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	need := l.size + int64(l.pending+2)*maxLedgerLine
	if l.header == nil {
		need += maxLedgerLine
	}
	if !l.noFalloc && l.allocated < need {
		err := fallocate(l.f, l.size, need-l.size+reserveAhead)
		switch {
		case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS):
			l.noFalloc = true // docs/operations.md: reserve-less file systems
		case err != nil:
			return diskErr("reserve space in "+l.path, err)
		default:
			l.allocated = need + reserveAhead
		}
	}
	l.pending++
	return nil
}

// release ends a reservation.
func (l *Lines) Release() {
	l.mu.Lock()
	if l.pending > 0 {
		l.pending--
	}
	l.mu.Unlock()
}

// appendAll writes the lines of forgets not yet in the ledger, chained,
// and fsyncs them once.
func (l *Lines) Append(lines []Line) error {
	return l.setWriteErr(l.appendLines(lines, false))
}

// appendLines is Append; with force, it also writes lines of forgets
// the ledger already counts (lines erasure's Recovery.ReconcileLedger carries over from a
// damaged tail).
func (l *Lines) appendLines(lines []Line, force bool) error {
	l.mu.Lock()
	if l.damage != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: %s has a damaged tail that the start-up did not repair", shredd.ErrLedger, l.path)
	}
	if l.header == nil {
		if err := l.writeHeaderLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
	}
	var buf bytes.Buffer
	var ids []shredd.ID
	seq, head := l.seq, l.head
	for _, e := range lines {
		id, err := shredd.ParseID(e.Forget)
		if err != nil {
			l.mu.Unlock()
			return err
		}
		if l.ids[id] && !force || slices.Contains(ids, id) {
			continue
		}
		seq++
		e.Seq, e.Prev = seq, head
		b := l.encodeLine(e)
		head = lineHash(b)
		buf.Write(append(b, '\n'))
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		l.mu.Unlock()
		return nil
	}
	if _, err := l.f.Write(buf.Bytes()); err != nil {
		// Never leave a partial line behind: cut back to the last whole one.
		l.f.Truncate(l.size)
		l.mu.Unlock()
		return diskErr("append to "+l.path, err)
	}
	l.size += int64(buf.Len())
	l.seq, l.head, l.lines = seq, head, l.lines+uint64(len(ids))
	l.written++
	mine := l.written
	l.mu.Unlock()

	l.syncMu.Lock()
	if l.synced < mine {
		l.mu.Lock()
		upto, f := l.written, l.f
		l.mu.Unlock()
		if err := f.Sync(); err != nil {
			l.syncMu.Unlock()
			return diskErr("fsync "+l.path, err)
		}
		l.synced = upto
	}
	l.syncMu.Unlock()
	l.mu.Lock()
	for _, id := range ids {
		l.ids[id] = true
	}
	l.mu.Unlock()
	crashpoint.Hit("ledger:appended")
	return nil
}

// readScan reads the whole ledger file and scans it.
func (l *Lines) ReadScan() (Scan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := readAll(l.f)
	if err != nil {
		return Scan{}, err
	}
	return l.scan(b)
}

// carryAuthentic returns the lines to keep: the intact ones, then the
// authentic lines of the damaged tail, carried over in their order
// (carried). A carried line counts as in the ledger already, so that a
// commit does not append it before the tail is rewritten.
func (l *Lines) CarryAuthentic(sc *Scan) (entries, carried []Line) {
	entries = slices.Clone(sc.Lines)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range sc.Damaged {
		if d.Authentic && !slices.ContainsFunc(entries, func(e Line) bool { return e.Forget == d.line.Forget }) {
			entries = append(entries, *d.line)
			carried = append(carried, *d.line)
			l.ids[d.id] = true // the commit below must not append it yet
		}
	}
	return entries, carried
}

// rewriteTail moves the damaged tail of sc out of the ledger (cut) and
// appends the carried lines again. It returns the damaged bytes' file.
func (l *Lines) RewriteTail(sc *Scan, carried []Line) (string, error) {
	damaged, err := l.cut(sc)
	if err != nil {
		return damaged, err
	}
	if err := l.appendLines(carried, true); err != nil {
		return damaged, fmt.Errorf("ledger: forget ledger: %w", err)
	}
	return damaged, nil
}

// finishCheck writes the ledger's header when it has none, then marks the
// ledger checked.
func (l *Lines) FinishCheck() error {
	if _, ok := l.Header(); !ok {
		l.mu.Lock()
		err := l.writeHeaderLocked()
		l.mu.Unlock()
		if err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.checked = true
	l.mu.Unlock()
	return nil
}

// cut moves the damaged tail of sc out of the ledger: its bytes are kept
// in a new file beside it (path.damaged-<time>, mode 0600), then the
// ledger is cut back to its intact part (a damaged header: the file is
// started again with a new header). It returns the new file's name.
func (l *Lines) cut(sc *Scan) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := readAll(l.f)
	if err != nil {
		return "", err
	}
	aside := fmt.Sprintf("%s.damaged-%s", l.path, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := datadir.Create(aside, b[min(sc.end, int64(len(b))):], datadir.Secret); err != nil {
		return "", diskErr("keep the damaged tail in "+aside, err)
	}
	if sc.Header == nil {
		l.header, l.damage = nil, nil
		if err := l.writeHeaderLocked(); err != nil {
			return "", err
		}
	} else {
		if err := l.f.Truncate(sc.end); err != nil {
			return "", diskErr("cut "+l.path, err)
		}
		if err := l.f.Sync(); err != nil {
			return "", diskErr("fsync "+l.path, err)
		}
		crashpoint.Hit("ledger:cut")
		ids := l.ids
		l.apply(&Scan{Header: sc.Header, headerHash: sc.headerHash, Lines: sc.Lines, seq: sc.seq, head: sc.head, end: sc.end})
		for id := range ids { // the carried lines, appended next
			l.ids[id] = l.ids[id] || ids[id]
		}
	}
	l.allocated = 0
	return aside, nil
}

func (l *Lines) Compact(minVersion int) (int, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := readAll(l.f)
	if err != nil {
		return 0, err
	}
	sc, err := l.scan(b)
	if err != nil {
		return 0, err
	}
	if sc.Header == nil || len(sc.Damaged) > 0 {
		return 0, nil // new, or damaged: erasure's Recovery at the next start
	}
	n := 0
	for n < len(sc.Lines) && sc.Lines[n].RootVersion < minVersion {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	h := *sc.Header
	c := Compaction{}
	if h.Compacted != nil {
		c = *h.Compacted
	}
	c.Lines += uint64(n)
	c.Seq, c.Head = sc.Lines[n-1].Seq, sc.hashes[n-1]
	c.Below = max(c.Below, minVersion)
	for _, e := range sc.Lines[:n] {
		c.Until = max(c.Until, e.CommittedAt)
	}
	h.Compacted = &c
	var out bytes.Buffer
	out.Write(l.encodeHeader(h))
	out.WriteByte('\n')
	// The kept lines verbatim: their seq and prev still chain.
	start := int64(len(bytes.SplitN(b, []byte("\n"), 2)[0])) + 1
	for _, e := range sc.Lines[:n] {
		start += int64(len(l.encodeLine(e))) + 1
	}
	out.Write(b[start:sc.end])
	if err := l.replaceFile(out.Bytes()); err != nil {
		return 0, err
	}
	crashpoint.Hit("ledger:compacted")
	nb, err := readAll(l.f)
	if err != nil {
		return 0, err
	}
	nsc, err := l.scan(nb)
	if err != nil {
		return 0, err
	}
	if nsc.Header == nil || len(nsc.Damaged) > 0 || nsc.seq != sc.seq {
		return 0, fmt.Errorf("%w: %s does not verify after compaction", shredd.ErrLedger, l.path)
	}
	l.apply(&nsc)
	l.synced = l.written // the new file holds every line written, fsynced
	return n, nil
}

// ScanFile scans b, the bytes of the forget ledger at path, under key,
// without opening it: what a check with the server stopped reads (the
// database's side is the caller's).
func ScanFile(path string, key, b []byte) (Scan, error) {
	l := &Lines{path: path, key: key}
	return l.scan(b)
}

// Key is the ledger's MAC key (LinesKey of the subject secret).
func (l *Lines) Key() []byte { return l.key }

// AcceptLoss reports whether the ledger was opened to drop a damaged tail
// even when forgets may be lost (Options.AcceptLoss).
func (l *Lines) AcceptLoss() bool { return l.opts.AcceptLoss }

// HeadKept reports whether this process kept the ledger's head with the
// root, or found it in step there (InStep).
func (l *Lines) HeadKept() bool {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	return l.kept != nil
}

// InStep records kept as the head kept with the root for this ledger: the
// start found them in step, and KeepHead has nothing to keep until the
// ledger moves.
func (l *Lines) InStep(kept *Head) {
	l.headMu.Lock()
	l.kept = kept
	l.headMu.Unlock()
}

// KeepHead records the ledger's head with root as stream's head (a
// root that keeps heads: the local root file), where a restore of the
// database cannot roll it back. Never the head of a ledger the start did
// not accept (FinishCheck): a refused start must not teach the root a
// truncated ledger. Without always, a head kept already is not kept again.
func (l *Lines) KeepHead(ctx context.Context, root keystore.RootStore, stream string, always bool) error {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	l.mu.Lock()
	h, ok := l.headLocked()
	checked := l.checked
	l.mu.Unlock()
	if !ok || !checked || !always && l.kept != nil && *l.kept == h {
		return nil
	}
	if err := KeepHead(ctx, root, stream, h); err != nil {
		return fmt.Errorf("ledger: keep the forget ledger's head with the root: %w", err)
	}
	crashpoint.Hit("ledger:headkept")
	l.kept = &h
	return nil
}
