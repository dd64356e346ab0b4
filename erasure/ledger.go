package erasure

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/storage"
)

// Domain-separation labels and the format of the forget ledger.
const (
	// LabelLedger is the label of the ledger's MAC key, derived from the
	// subject secret (LedgerKey).
	LabelLedger = "shredd/v1/forget-ledger"
	// LabelLedgerLine is the label of a line's hash, which the next line
	// carries (the chain).
	LabelLedgerLine = "shredd/v1/forget-ledger-line"
	// LabelFingerprint is the label of a secret's fingerprint
	// (Fingerprint).
	LabelFingerprint = "shredd/v1/fingerprint"
	// LedgerFormat names the ledger's format in its header line.
	LedgerFormat = "shredd-forget-ledger/v2"
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

// LedgerFingerprints are the fingerprints (Fingerprint) of the secrets the
// data depends on, recorded in the ledger's header when it is created. An
// empty field was not known then and is not compared.
type LedgerFingerprints struct {
	SubjectKey     string `json:"subject_key,omitempty"`
	Root           string `json:"root,omitempty"`
	LogKey         string `json:"log_key,omitempty"`
	AttestationKey string `json:"attestation_key,omitempty"`
}

// LedgerCompaction records, in the header of a compacted ledger, the lines
// compaction dropped: a compacted ledger is told apart from a deleted or
// truncated one, and its chain still verifies from the last dropped line.
type LedgerCompaction struct {
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

// LedgerHeader is the first line of a ledger: its format, its random
// instance identity, when it was created, the fingerprints of the secrets
// present then, and what compaction dropped. It is authenticated like the
// lines, and its hash is the first line's prev.
type LedgerHeader struct {
	Format       string             `json:"format"`
	Instance     string             `json:"instance"`
	CreatedAt    int64              `json:"created_at"`
	Fingerprints LedgerFingerprints `json:"fingerprints"`
	Compacted    *LedgerCompaction  `json:"compacted,omitempty"`
	MAC          string             `json:"mac,omitempty"`
}

// LedgerOptions configures OpenLedger.
type LedgerOptions struct {
	// Fingerprints are those of the secrets present: written into a new
	// ledger's header, compared with an existing one's.
	Fingerprints LedgerFingerprints
	// AcceptLoss lets ReconcileLedger drop a damaged tail even when the
	// database lacks forgets it may have held (shredd ledger repair
	// --accept-loss); without it such a start is refused.
	AcceptLoss bool
}

// Ledger is the durable trace every forget leaves outside the database: an
// append-only file of one header line and then one line per committed
// forget (its id, sid, key generation, times, commitment and the root
// version it was committed under), fsynced before the forget is answered.
// A database restored from a backup lacks the forgets committed after the
// backup; ReconcileLedger finds them in the ledger and commits them again,
// so a restore never brings a forgotten subject back. The file names no
// raw subject id (sids are keyed hashes, as in the database).
//
// Every line is authenticated (HMAC-SHA256 under LedgerKey) and chained:
// it carries its sequence number and the hash of the line before it, the
// first one the header's. Truncation inside a line, edits and reordering
// break the chain; with the local root the head (the last line's number
// and hash) is also kept in the root file (KeepLedgerHead), where a restore
// of the database cannot roll it back, so that lines cut at a line's end,
// or a ledger replaced, are seen too. A root store that keeps forget
// records (keystore.ForgetKeeper: Vault) keeps no head: the records hold
// every committed forget, so a ledger cut, rolled back or copied to another
// data directory is repaired from them and the database, and nothing per
// data directory is kept with the root. A damaged tail is never dropped in
// silence (ReconcileLedger).
//
// Space for the next lines is reserved (fallocate) before a forget
// commits: a full disk refuses the forget (shredd.ErrDiskFull) rather than
// committing it and then failing to record it.
//
// Entries under a root version the root store has since destroyed are
// never needed again (a backup older than that version is refused), and
// Compact drops them.
type Ledger struct {
	path string
	key  []byte
	opts LedgerOptions

	mu        sync.Mutex // guards everything below but the sync and head state
	f         *os.File
	header    *LedgerHeader      // nil: a new (empty) file, or a damaged header
	ids       map[shredd.ID]bool // forgets durably in the ledger
	seq       uint64             // the last intact line's sequence number
	head      string             // its hash (the header's, or the compaction's, before any line)
	lines     uint64             // intact lines in the file
	size      int64              // bytes of the intact part; writes go here
	damage    *ledgerScan        // the scan that found a damaged tail, until ReconcileLedger repairs it
	checked   bool               // ReconcileLedger found the ledger whole, or repaired it: its head may be kept
	written   uint64             // appends written to f
	allocated int64              // the file's blocks are reserved up to here
	pending   int                // reservations not yet used or released
	noFalloc  bool               // the file system does not reserve (EOPNOTSUPP)

	// Concurrent appends share fsyncs: each waits until an fsync that began
	// after its write has returned (group commit).
	syncMu sync.Mutex
	synced uint64 // appends known durable; guarded by syncMu

	headMu sync.Mutex   // serialises KeepLedgerHead
	kept   *ledger.Head // the head last kept with the root by this process

	errMu   sync.Mutex
	lastErr error // the last append's failure, nil once one succeeds (WriteErr)
}

// WriteErr returns the error of the last append that failed, or nil when
// the last one succeeded (or none was made): GET /readyz answers 503 while
// the ledger does not take its lines.
func (l *Ledger) WriteErr() error {
	if l == nil {
		return nil
	}
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.lastErr
}

func (l *Ledger) setWriteErr(err error) error {
	l.errMu.Lock()
	l.lastErr = err
	l.errMu.Unlock()
	return err
}

// ledgerLine is one line of the ledger file. Seq and Forget come first: a
// line torn by a crash still names its forget in all but its first bytes.
type ledgerLine struct {
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

// ledgerLineV1 is a line of the first format (no header, no chain), read
// once to convert the file.
type ledgerLineV1 struct {
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

// LedgerKey derives the ledger's MAC key from the subject secret.
func LedgerKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(LabelLedger))
	return m.Sum(nil)
}

func (l *Ledger) macOf(v any) string {
	b, _ := json.Marshal(v)
	m := hmac.New(sha256.New, l.key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

func (l *Ledger) mac(e ledgerLine) string     { e.MAC = ""; return l.macOf(e) }
func (l *Ledger) macV1(e ledgerLineV1) string { e.MAC = ""; return l.macOf(e) }
func (l *Ledger) macHeader(h LedgerHeader) string {
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

// OpenLedger opens (creating, mode 0600) the ledger file at path. The file
// is never followed through a symlink. A ledger of the first format (no
// header) is converted. A header whose fingerprints differ from
// opts.Fingerprints is refused (ErrLedger, naming the secret). A damaged
// tail is not an error here: ReconcileLedger decides, and appends are
// refused until it has.
func OpenLedger(path string, key []byte, opts LedgerOptions) (*Ledger, error) {
	f, err := openLedgerFile(path)
	if err != nil {
		return nil, err
	}
	l := &Ledger{path: path, key: key, opts: opts, f: f}
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
func (l *Ledger) load() error {
	b, err := readAll(l.f)
	if err != nil {
		return err
	}
	sc, err := l.scan(b)
	if err != nil {
		return err
	}
	if sc.v1 != nil {
		if err := l.convertV1(sc.v1); err != nil {
			return err
		}
		return l.load()
	}
	l.apply(&sc)
	return nil
}

// apply sets the ledger's state from a scan of its file.
func (l *Ledger) apply(sc *ledgerScan) {
	l.header, l.seq, l.head, l.size = sc.header, sc.seq, sc.head, sc.end
	l.lines = uint64(len(sc.lines))
	l.ids = make(map[shredd.ID]bool, len(sc.lines))
	for _, e := range sc.lines {
		id, _ := shredd.ParseID(e.Forget)
		l.ids[id] = true
	}
	l.damage = nil
	if len(sc.damaged) > 0 {
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
func (l *Ledger) checkFingerprints() error {
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
func (l *Ledger) Header() (LedgerHeader, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.header == nil {
		return LedgerHeader{}, false
	}
	return *l.header, true
}

// Head returns the ledger's head: its instance, last sequence number and
// hash, and lines. False when it has no header yet, or a damaged tail.
func (l *Ledger) Head() (ledger.Head, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.headLocked()
}

func (l *Ledger) headLocked() (ledger.Head, bool) {
	if l.header == nil || l.damage != nil {
		return ledger.Head{}, false
	}
	return ledger.Head{Instance: l.header.Instance, Seq: l.seq, Hash: l.head, Lines: l.lines}, true
}

// Path returns the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Has reports whether the ledger holds the forget.
func (l *Ledger) Has(id shredd.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id]
}

// Len returns the number of forgets in the ledger (compacted ones left
// out).
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

// ledgerScan is what a read of the file found: the header, the intact
// chain of lines, and the damaged tail after it.
type ledgerScan struct {
	header     *LedgerHeader
	headerHash string
	lines      []ledgerLine
	hashes     []string // of lines
	seq        uint64
	head       string
	end        int64 // bytes of the header and the intact lines
	damaged    []DamagedLine
	size       int64          // bytes in the file
	v1         []ledgerLineV1 // a file of the first format
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

	line *ledgerLine // when Authentic
	id   shredd.ID
}

var forgetRE = regexp.MustCompile(`"forget":"([0-9a-f]{32})"`)

// scan reads b as a ledger file. It fails only on a file of the first
// format with a line that does not verify.
func (l *Ledger) scan(b []byte) (ledgerScan, error) {
	sc := ledgerScan{size: int64(len(b))}
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
	var h LedgerHeader
	if !ps[0].torn && json.Unmarshal(ps[0].b, &h) == nil && h.Format == LedgerFormat && hmac.Equal([]byte(h.MAC), []byte(l.macHeader(h))) && canonical(h, ps[0].b) {
		sc.header, sc.headerHash = &h, lineHash(ps[0].b)
	} else if v1, ok, err := l.scanV1(b); ok {
		sc.v1 = v1
		return sc, err
	} else {
		// The header is damaged: nothing after it can be placed.
		for _, p := range ps {
			sc.damaged = append(sc.damaged, l.classify(p.b, p.off, p.torn))
		}
		sc.damaged[0].Reason = "the header line is damaged: " + sc.damaged[0].Reason
		return sc, nil
	}
	sc.end = int64(len(ps[0].b)) + 1
	sc.seq, sc.head = 0, sc.headerHash
	if c := h.Compacted; c != nil {
		sc.seq, sc.head = c.Seq, c.Head
	}
	for i, p := range ps[1:] {
		var e ledgerLine
		ok := !p.torn && json.Unmarshal(p.b, &e) == nil && hmac.Equal([]byte(e.MAC), []byte(l.mac(e))) && canonical(e, p.b) &&
			e.Seq == sc.seq+1 && e.Prev == sc.head && validLine(e)
		if !ok {
			for _, q := range ps[1+i:] {
				sc.damaged = append(sc.damaged, l.classify(q.b, q.off, q.torn))
			}
			break
		}
		sc.lines = append(sc.lines, e)
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

func validLine(e ledgerLine) bool {
	if _, err := shredd.ParseID(e.Forget); err != nil {
		return false
	}
	s, err := hex.DecodeString(e.SID)
	return err == nil && len(s) == len(envelope.SID{})
}

// classify reads what it can of a damaged line.
func (l *Ledger) classify(b []byte, off int64, torn bool) DamagedLine {
	d := DamagedLine{Offset: off, Torn: torn}
	var e ledgerLine
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
func (l *Ledger) scanV1(b []byte) ([]ledgerLineV1, bool, error) {
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1]
	}
	var out []ledgerLineV1
	for n, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var e ledgerLineV1
		ok := json.Unmarshal(line, &e) == nil && hmac.Equal([]byte(e.MAC), []byte(l.macV1(e))) &&
			validLine(ledgerLine{Forget: e.Forget, SID: e.SID})
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
func (l *Ledger) convertV1(v1 []ledgerLineV1) error {
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
		e := ledgerLine{Seq: seq, Forget: o.Forget, SID: o.SID, Gen: o.Gen, RequestedAt: o.RequestedAt, CommittedAt: o.CommittedAt,
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
func (l *Ledger) replaceFile(b []byte) error {
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

func (l *Ledger) newHeader() (LedgerHeader, error) {
	inst := make([]byte, 16)
	if _, err := rand.Read(inst); err != nil {
		return LedgerHeader{}, err
	}
	return LedgerHeader{Format: LedgerFormat, Instance: hex.EncodeToString(inst), CreatedAt: time.Now().UnixNano(), Fingerprints: l.opts.Fingerprints}, nil
}

func (l *Ledger) encodeHeader(h LedgerHeader) []byte {
	h.MAC = l.macHeader(h)
	b, _ := json.Marshal(h) // strings and numbers only
	return b
}

func (l *Ledger) encodeLine(e ledgerLine) []byte {
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
func (l *Ledger) writeHeaderLocked() error {
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
func (l *Ledger) reserve() error {
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
func (l *Ledger) release() {
	l.mu.Lock()
	if l.pending > 0 {
		l.pending--
	}
	l.mu.Unlock()
}

// appendAll writes the lines of forgets not yet in the ledger, chained,
// and fsyncs them once.
func (l *Ledger) appendAll(lines []ledgerLine) error {
	return l.setWriteErr(l.appendLines(lines, false))
}

// appendLines is appendAll; with force, it also writes lines of forgets
// the ledger already counts (lines ReconcileLedger carries over from a
// damaged tail).
func (l *Ledger) appendLines(lines []ledgerLine, force bool) error {
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

// ledgerReserve reserves the ledger's room for one forget's line before
// the forget commits (Ledger.reserve); the returned func releases it.
func (s *Eraser) ledgerReserve() (func(), error) {
	l := s.opts.Ledger
	if l == nil {
		return func() {}, nil
	}
	if err := l.reserve(); err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", l.setWriteErr(err))
	}
	return l.release, nil
}

// ledgerAppend records committed forgets in the ledger, when the service
// has one; it returns once they are durable (an fsync shared with the
// forgets appended at the same time).
func (s *Eraser) ledgerAppend(ctx context.Context, ids ...shredd.ID) error {
	return appendLedger(ctx, s, ids, true)
}

// appendLedger is ledgerAppend; with keep, the lines are also kept as a
// forget record with the root store, when it keeps them. A record that
// could not be written does not fail the forget (the root store may be
// down while forgets still commit): it stays pending, and the background
// work writes it again.
func appendLedger(ctx context.Context, s *Eraser, ids []shredd.ID, keep bool) error {
	l := s.opts.Ledger
	if l == nil {
		return nil
	}
	ids = slices.DeleteFunc(slices.Clone(ids), l.Has)
	if len(ids) == 0 {
		return nil
	}
	lines, err := s.ledgerLines(ctx, ids)
	if err != nil {
		return err
	}
	if err := l.appendAll(lines); err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	if keep {
		_ = s.records.keep(ctx, lines) // pending on failure: Run retries and warns
	}
	return nil
}

// ledgerRows reads the ledger lines' columns of forgets ids, in one
// statement, by id (the forget, root version and log size left to fill).
func ledgerRows(ctx context.Context, db *storage.DB, ids []shredd.ID) (map[shredd.ID]ledgerLine, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id[:]
	}
	rows, err := db.QueryContext(ctx, `SELECT id, sid, gen, requested_at, committed_at, deadline, commitment FROM forgets
		WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	defer rows.Close()
	out := make(map[shredd.ID]ledgerLine, len(ids))
	for rows.Next() {
		var idb, sid []byte
		var requested, deadline int64
		var committed, gen sql.NullInt64
		var commitment sql.NullString
		if err := rows.Scan(&idb, &sid, &gen, &requested, &committed, &deadline, &commitment); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		var id shredd.ID
		copy(id[:], idb)
		out[id] = ledgerLine{SID: hex.EncodeToString(sid), Gen: uint32(gen.Int64),
			RequestedAt: requested, CommittedAt: committed.Int64, Deadline: deadline, Commitment: commitment.String}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	return out, nil
}

// ledgerLines reads the lines of committed forgets from the database.
func (s *Eraser) ledgerLines(ctx context.Context, ids []shredd.ID) ([]ledgerLine, error) {
	// The newest root version the database's bucket keys were wrapped under
	// when the forgets committed: a backup taken before them needs that
	// version or an older one (read from the database, not the root store:
	// a forget must not wait for Vault).
	rootVersion, err := s.keys.BucketRootVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	// The log's size now: checkpoints up to it may have been handed out, so
	// a database whose log is shorter was restored from an older copy.
	var logSize int64
	if j := s.opts.Journal; j != nil {
		if logSize, err = j.Log().Size(ctx); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
	}
	lines := make([]ledgerLine, 0, len(ids))
	for chunk := range slices.Chunk(ids, 500) { // a group's lines in one read (a group holds at most 64)
		rows, err := ledgerRows(ctx, s.db, chunk)
		if err != nil {
			return nil, err
		}
		for _, id := range chunk {
			r, ok := rows[id]
			if !ok {
				return nil, fmt.Errorf("erasure: forget ledger: forget %s: %w", id, sql.ErrNoRows)
			}
			r.Forget, r.RootVersion, r.LogSize = id.String(), rootVersion, logSize
			lines = append(lines, r)
		}
	}
	return lines, nil
}

// LedgerCheck is what a ledger's check found (CheckLedger, and
// ReconcileLedger before it repairs): the intact part, the damaged tail,
// the lines the head kept with the root counts that the file lacks, and
// which of the forgets involved the database holds.
type LedgerCheck struct {
	Path    string
	Header  *LedgerHeader // nil: a new file, or a damaged header
	Lines   int           // intact lines
	Seq     uint64        // the last intact line's sequence number
	Damaged []DamagedLine // the damaged tail, in file order
	// Kept is the head kept with the root (nil: none); KeptErr says why it
	// could not be read (the check was then made without it).
	Kept    *ledger.Head
	KeptErr error
	// Records: the root store keeps forget records (keystore.ForgetKeeper)
	// and so no head; the check is made without one (Kept is nil).
	Records bool
	// Missing counts the lines the kept head counts beyond the intact
	// part (some may be in Damaged).
	Missing uint64
	// Replaced: the file is not the ledger whose head the root keeps (it
	// was deleted, replaced or its header damaged).
	Replaced bool
	// Fork: the file's line at the kept head's number is another line.
	Fork bool
	// InDB counts the damaged lines' forgets the database holds.
	InDB int
	// Reapply counts authentic damaged lines whose forgets the database
	// lacks: they are committed again from the line.
	Reapply int
	// Lost lists the forget ids that damaged lines name, unauthenticated,
	// and the database lacks.
	Lost []string
	// LostUnknown counts lines (damaged without a readable forget id, or
	// missing) that the database's committed forgets cannot account for.
	LostUnknown int
	// DBMissing counts the committed forgets of the database that the
	// ledger lacks (recorded again from the database).
	DBMissing int
}

// Damage reports whether the ledger is not whole: a damaged tail, lines
// missing, replaced, or forked from the head kept with the root.
func (c LedgerCheck) Damage() bool {
	return len(c.Damaged) > 0 || c.Missing > 0 || c.Replaced || c.Fork
}

// Loss reports whether repairing the ledger may lose a forget that the
// database does not hold.
func (c LedgerCheck) Loss() bool { return len(c.Lost) > 0 || c.LostUnknown > 0 || c.Fork }

// Summary is the check's verdict in one sentence.
func (c LedgerCheck) Summary() string {
	var what []string
	if n := len(c.Damaged); n > 0 {
		what = append(what, fmt.Sprintf("%d damaged line(s) from byte %d", n, c.Damaged[0].Offset))
	}
	if c.Replaced {
		what = append(what, fmt.Sprintf("it is not the ledger whose head the root keeps (instance %.8s…, %d lines)", c.Kept.Instance, c.Kept.Lines))
	} else if c.Missing > 0 {
		what = append(what, fmt.Sprintf("%d line(s) the root store recorded (through line %d) are missing", c.Missing, c.Kept.Seq))
	}
	if c.Fork {
		what = append(what, fmt.Sprintf("its line %d differs from the one the root store recorded", c.Kept.Seq))
	}
	if len(what) == 0 {
		return "the ledger is whole"
	}
	s := strings.Join(what, "; ")
	if !c.Loss() {
		return s + "; the database holds every forget involved: nothing is lost"
	}
	var lost []string
	if len(c.Lost) > 0 {
		lost = append(lost, fmt.Sprintf("%d forget(s) the database lacks (%s)", len(c.Lost), strings.Join(c.Lost, ", ")))
	}
	if c.LostUnknown > 0 {
		lost = append(lost, fmt.Sprintf("%d line(s) whose forget cannot be read and that the database cannot account for", c.LostUnknown))
	}
	if c.Fork {
		lost = append(lost, "the lines after the fork")
	}
	return s + "; would be lost: " + strings.Join(lost, " and ")
}

// Report is the check's full text, for shredd ledger check.
func (c LedgerCheck) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "forget ledger %s\n", c.Path)
	switch h := c.Header; {
	case h != nil:
		fmt.Fprintf(&b, "  header: instance %s, created %s\n", h.Instance, time.Unix(0, h.CreatedAt).UTC().Format(time.RFC3339))
		if h.Compacted != nil {
			fmt.Fprintf(&b, "  compacted: %d line(s) dropped, through line %d (destroyed root versions)\n", h.Compacted.Lines, h.Compacted.Seq)
		}
	case len(c.Damaged) > 0:
		fmt.Fprintln(&b, "  header: damaged")
	default:
		fmt.Fprintln(&b, "  header: none (a new, empty ledger)")
	}
	fmt.Fprintf(&b, "  intact: %d line(s), through line %d\n", c.Lines, c.Seq)
	switch {
	case c.Records:
		fmt.Fprintln(&b, "  head kept with the root: none (the root store keeps the forget records instead; a start commits again what the database lacks from them)")
	case c.KeptErr != nil:
		fmt.Fprintf(&b, "  head kept with the root: not read (%v)\n", c.KeptErr)
	case c.Kept == nil:
		fmt.Fprintln(&b, "  head kept with the root: none yet")
	default:
		fmt.Fprintf(&b, "  head kept with the root: instance %s, line %d, %d line(s)\n", c.Kept.Instance, c.Kept.Seq, c.Kept.Lines)
	}
	for _, d := range c.Damaged {
		id := d.Forget
		if id == "" {
			id = "(unreadable)"
		}
		fmt.Fprintf(&b, "  damaged at byte %d: line %d, forget %s: %s\n", d.Offset, d.Seq, id, d.Reason)
	}
	if c.DBMissing > 0 {
		fmt.Fprintf(&b, "  the database holds %d committed forget(s) the ledger lacks: they are recorded again from it\n", c.DBMissing)
	}
	fmt.Fprintf(&b, "  verdict: %s\n", c.Summary())
	return b.String()
}

// dbForget is what the check needs of a forget of the database.
type dbForget struct {
	state     string
	committed int64
	alias     bool // merged into the kept forget of its subject (migration 0007): present as that one
}

// committedForgets reads the database's forgets past requested, and the
// ids merged into them (aliases): a ledger line or forget record naming
// one is present, never committed again nor missing from the ledger.
func committedForgets(ctx context.Context, db *storage.DB) (map[shredd.ID]dbForget, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, state, coalesce(committed_at, 0) FROM forgets WHERE state<>?`, shredd.StateRequested)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	defer rows.Close()
	out := map[shredd.ID]dbForget{}
	for rows.Next() {
		var b []byte
		var f dbForget
		if err := rows.Scan(&b, &f.state, &f.committed); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		var id shredd.ID
		copy(id[:], b)
		out[id] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	return out, aliases(ctx, db, out)
}

// compacted reports whether a forget of the database missing from the
// ledger was dropped by a compaction of it: committed before the newest
// line dropped, and past committed (an epoch came after it).
func compacted(h *LedgerHeader, f dbForget) bool {
	return h != nil && h.Compacted != nil && f.committed <= h.Compacted.Until && f.state != shredd.StateCommitted
}

// assess checks a scan against the head kept with the root and the
// database's forgets.
func assess(path string, sc *ledgerScan, kept *ledger.Head, keptErr error, db map[shredd.ID]dbForget) LedgerCheck {
	c := LedgerCheck{Path: path, Header: sc.header, Lines: len(sc.lines), Seq: sc.seq, Damaged: sc.damaged, Kept: kept, KeptErr: keptErr}
	inLedger := map[shredd.ID]bool{}
	for _, e := range sc.lines {
		id, _ := shredd.ParseID(e.Forget)
		inLedger[id] = true
	}
	identified := map[shredd.ID]DamagedLine{}
	unknown := 0
	for _, d := range sc.damaged {
		switch {
		case d.Forget == "":
			unknown++
		case !inLedger[d.id]:
			if prev, ok := identified[d.id]; !ok || d.Authentic && !prev.Authentic {
				identified[d.id] = d
			}
		}
	}
	if kept != nil {
		n := uint64(len(sc.damaged))
		switch {
		case sc.header == nil && len(sc.damaged) == 0 && kept.Lines == 0 && kept.Seq == 0:
			// An empty file where the root recorded an empty ledger.
			c.Replaced = true
		case sc.header == nil || sc.header.Instance != kept.Instance:
			c.Replaced = true
			if kept.Lines > n {
				unknown += int(kept.Lines - n)
			}
		case kept.Seq > sc.seq:
			c.Missing = kept.Seq - sc.seq
			if c.Missing > n {
				unknown += int(c.Missing - n)
			}
		default:
			c.Fork = !headAt(sc, kept)
		}
	}
	for id, f := range db {
		if !f.alias && !inLedger[id] && !compacted(sc.header, f) {
			if _, ok := identified[id]; !ok {
				c.DBMissing++
			}
		}
	}
	for id, d := range identified {
		switch _, ok := db[id]; {
		case ok:
			c.InDB++
		case d.Authentic:
			c.Reapply++
		default:
			c.Lost = append(c.Lost, id.String())
		}
	}
	slices.Sort(c.Lost)
	c.LostUnknown = max(0, unknown-c.DBMissing)
	return c
}

// headAt reports whether the scan's line at the kept head's number has the
// kept hash (true when that line was compacted away, beyond checking).
func headAt(sc *ledgerScan, kept *ledger.Head) bool {
	first := uint64(1)
	if c := sc.header.Compacted; c != nil {
		first = c.Seq + 1
		if kept.Seq == c.Seq {
			return kept.Hash == c.Head
		}
		if kept.Seq < c.Seq {
			// Compacted away, the header rewritten with it: beyond
			// checking (PrecheckLedger compares the compaction with the
			// root's versions instead).
			return true
		}
	}
	switch {
	case kept.Seq == 0:
		return kept.Hash == sc.headerHash
	case kept.Seq < first:
		return true
	}
	return sc.hashes[kept.Seq-first] == kept.Hash
}

// CheckLedger checks the ledger file at path without changing anything
// (shredd ledger check, with the server stopped): the chain, the head kept
// with the root (kept, nil for none; keptErr when it could not be read),
// and which forgets of a damaged tail the database db holds.
func CheckLedger(ctx context.Context, db *storage.DB, path string, key []byte, kept *ledger.Head, keptErr error) (LedgerCheck, error) {
	b, err := datadir.Read(path, datadir.Secret, 1<<40)
	if err != nil {
		return LedgerCheck{}, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	l := &Ledger{path: path, key: key}
	sc, err := l.scan(b)
	if err != nil {
		return LedgerCheck{}, err
	}
	if sc.v1 != nil {
		return LedgerCheck{Path: path, Lines: len(sc.v1)}, nil // converted at the next start
	}
	forgets, err := committedForgets(ctx, db)
	if err != nil {
		return LedgerCheck{}, err
	}
	return assess(path, &sc, kept, keptErr, forgets), nil
}

// PrecheckLedger is the start's check of the ledger at path before it
// writes anything (phase one): its directory; a root store older than the
// ledger's compaction (the root still holds versions an epoch destroyed
// while dropping ledger lines: refused whatever acceptLoss says, since it
// would open what those forgets destroyed); then the file (missing:
// empty), its chain and the head kept with the local root, against the
// forgets of db. A ledger whose repair would lose a forget the database
// lacks is refused, as ReconcileLedger would refuse it later, unless
// acceptLoss; a root store that keeps forget records instead of the head
// (Vault) is left to ReconcileLedger.
func PrecheckLedger(ctx context.Context, db *storage.DB, path string, key []byte, root keystore.RootStore, acceptLoss bool) error {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory that holds the ledger %s: nothing was changed; create it (mode 0700), or point --forget-ledger at the ledger's file", shredd.ErrLedger, filepath.Dir(path), path)
	}
	b, err := datadir.Read(path, datadir.Secret, 1<<40)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = nil
	case err != nil:
		return nil // opening it refuses it, with the fix
	}
	l := &Ledger{path: path, key: key}
	sc, err := l.scan(b)
	if err != nil || sc.v1 != nil {
		return nil // opening it refuses or converts it
	}
	if c := sc.header; c != nil && c.Compacted != nil && c.Compacted.Below > 0 {
		v, err := root.Versions(ctx)
		if err != nil {
			return err
		}
		if below := c.Compacted.Below; v.MinAvailable < below {
			return fmt.Errorf("%w: the root file holds root version %d, but %s dropped lines of forgets whose keys an epoch destroyed below root version %d: "+
				"the root file is older than the ledger (put back from a copy taken before that epoch) and would open what those forgets destroyed. Nothing was changed. "+
				"%s", shredd.ErrLedger, v.MinAvailable, path, below, rootFix(root))
		}
	}
	// The head kept with the root: the local root file's (a Vault root
	// keeps forget records instead, which ReconcileLedger reads); a repair
	// that accepts the loss checks nothing more here.
	if root.Kind() != "local" || acceptLoss {
		return nil
	}
	kept, keptErr := keptHeadOf(ctx, root)
	forgets, err := committedForgets(ctx, db)
	if err != nil {
		return err
	}
	if check := assess(path, &sc, kept, keptErr, forgets); check.Damage() && check.Loss() {
		return notWhole(path, check)
	}
	return nil
}

// notWhole is the refusal of a ledger whose repair would lose a forget
// the database lacks.
func notWhole(path string, check LedgerCheck) error {
	return fmt.Errorf("%w: %s is not whole: %s. Nothing was changed. Run `shredd ledger check` (server stopped) to see what is damaged and what would be lost, then restore the ledger file, or accept the loss with `shredd ledger repair --accept-loss` (docs/operations.md, \"The forget ledger\")",
		shredd.ErrLedger, path, check.Summary())
}

// rootFix is what to do about a root store older than the ledger.
func rootFix(root keystore.RootStore) string {
	if root.Kind() == "local" {
		return "Put back the live root.key (never one from a backup)"
	}
	return "The root store was restored from a snapshot taken before that epoch: point shredd at the live one (--vault-addr, --vault-transit-mount, --vault-key)"
}

// LedgerReport says what ReconcileLedger did.
type LedgerReport struct {
	Reapplied int // forgets of the ledger the database lacked, committed again
	Recorded  int // committed forgets of the database the ledger lacked, appended
	// Repaired, when set, is the check of a ledger that was not whole and
	// was repaired: its damaged tail moved to DamagedFile and rewritten
	// from the database and the tail's authentic lines.
	Repaired    *LedgerCheck
	DamagedFile string
	// HeadErr says why the head kept with the root could not be read or
	// written (the ledger was then checked without it).
	HeadErr error
	// LogRewound is set when the database's transparency log (of LogSize
	// entries) is shorter than it was when a forget of the ledger was
	// answered (LedgerLogSize): the database was restored from an older
	// copy, and checkpoints handed out above LogSize do not verify against
	// it.
	LogRewound    bool
	LogSize       int64
	LedgerLogSize int64
	// FromRecords counts the forgets of Reapplied that came from the
	// forget records kept with the root store (the local ledger lacked
	// them: another node answered them, or this node's disk was lost).
	FromRecords int
	// RecordsErr says why the forget records could not be read or written
	// (the root store is down): the background work writes the pending
	// ones once it is back.
	RecordsErr error
}

// ReconcileLedger makes the database and the forget ledger agree before
// serving. It checks the ledger's chain and its head against the head
// kept with the root. A ledger that is not whole (a damaged tail, lines
// missing, replaced) is repaired when nothing is lost: the database holds
// every forget involved (or the damaged line itself is authentic); the
// damaged bytes are kept beside the ledger (DamagedFile) and the tail is
// rewritten. Otherwise the start is refused with ErrLedger, naming shredd
// ledger check and shredd ledger repair, unless LedgerOptions.AcceptLoss.
// Then a forget in the ledger that the database lacks (the database was
// restored from a backup taken before it) is committed again with its id,
// times and commitment, destroying the subject's key in the restored
// database; a committed forget missing from the ledger (a crash between
// the commit and the ledger's fsync) is appended; the head is kept with
// the root. Without a ledger it does nothing.
func (s *Eraser) ReconcileLedger(ctx context.Context) (LedgerReport, error) {
	var rep LedgerReport
	l := s.opts.Ledger
	if l == nil {
		return rep, nil
	}
	// This node's work waits; other nodes' only when a forget must be
	// committed again (below): a node joining a cluster whose work lock
	// another node holds for a long re-key pass must not wait for it to
	// find its ledger in step.
	s.workMu.Lock()
	defer s.workMu.Unlock()
	sc, err := l.readScan()
	if err != nil {
		return rep, err
	}
	kept, keptErr := s.keptHead(ctx)
	rep.HeadErr = keptErr
	db, err := committedForgets(ctx, s.db)
	if err != nil {
		return rep, err
	}
	check := assess(l.path, &sc, kept, keptErr, db)
	if check.Damage() {
		if check.Loss() && !l.opts.AcceptLoss {
			return rep, notWhole(l.path, check)
		}
		rep.Repaired = &check
	}
	if err := s.checkLogSize(ctx, &sc, &rep); err != nil {
		return rep, err
	}
	entries, carried := l.carryAuthentic(&sc)
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	if release, rep.Reapplied, err = s.reapplyAll(ctx, entries, db, nil); err != nil {
		return rep, err
	}
	if err := reconcileRecords(ctx, s, db, &rep, &release); err != nil {
		return rep, err
	}
	if rep.Repaired != nil && len(sc.damaged) > 0 {
		if rep.DamagedFile, err = l.rewriteTail(&sc, carried); err != nil {
			return rep, err
		}
	}
	recorded, err := s.recordMissing(ctx, sc.header)
	if err != nil {
		return rep, err
	}
	rep.Recorded = recorded
	if err := l.finishCheck(); err != nil {
		return rep, err
	}
	if h, ok := l.Head(); ok && keptErr == nil {
		if kept != nil && *kept == h {
			l.headMu.Lock()
			l.kept = kept // in step: the background work has nothing to keep
			l.headMu.Unlock()
		} else if err := s.KeepLedgerHead(ctx); err != nil {
			rep.HeadErr = err
		}
	}
	return rep, nil
}

// readScan reads the whole ledger file and scans it.
func (l *Ledger) readScan() (ledgerScan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := readAll(l.f)
	if err != nil {
		return ledgerScan{}, err
	}
	return l.scan(b)
}

// checkLogSize compares, when there is a journal, the size of the
// database's transparency log with the largest size a line of the ledger
// recorded (rep's LogSize, LedgerLogSize and LogRewound).
func (s *Eraser) checkLogSize(ctx context.Context, sc *ledgerScan, rep *LedgerReport) error {
	j := s.opts.Journal
	if j == nil {
		return nil
	}
	size, err := j.Log().Size(ctx)
	if err != nil {
		return fmt.Errorf("erasure: forget ledger: %w", err)
	}
	for _, e := range sc.lines {
		rep.LedgerLogSize = max(rep.LedgerLogSize, e.LogSize)
	}
	rep.LogSize, rep.LogRewound = size, size < rep.LedgerLogSize
	return nil
}

// carryAuthentic returns the lines to keep: the intact ones, then the
// authentic lines of the damaged tail, carried over in their order
// (carried). A carried line counts as in the ledger already, so that a
// commit does not append it before the tail is rewritten.
func (l *Ledger) carryAuthentic(sc *ledgerScan) (entries, carried []ledgerLine) {
	entries = slices.Clone(sc.lines)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range sc.damaged {
		if d.Authentic && !slices.ContainsFunc(entries, func(e ledgerLine) bool { return e.Forget == d.line.Forget }) {
			entries = append(entries, *d.line)
			carried = append(carried, *d.line)
			l.ids[d.id] = true // the commit below must not append it yet
		}
	}
	return entries, carried
}

// reapplyAll commits again each forget of entries that the database
// (db) lacks, holding the work lock of every node from the first one on.
// It returns the lock's release (held, when the caller passes the release
// of the lock it holds already; nil when it was not taken; the caller
// releases it once the ledger is in step) and how many forgets were
// re-applied.
func (s *Eraser) reapplyAll(ctx context.Context, entries []ledgerLine, db map[shredd.ID]dbForget, held func()) (release func(), reapplied int, err error) {
	release = held
	for _, e := range entries {
		id, _ := shredd.ParseID(e.Forget)
		if _, ok := db[id]; ok {
			continue
		}
		if release == nil {
			if release, err = s.db.Exclusive(ctx, "erasure.work"); err != nil {
				return release, reapplied, fmt.Errorf("erasure: forget ledger: %w: %w", shredd.ErrUnavailable, err)
			}
		}
		var sid envelope.SID
		b, _ := hex.DecodeString(e.SID)
		copy(sid[:], b)
		applied, err := s.reapply(ctx, id, sid, e)
		if err != nil {
			return release, reapplied, err
		}
		if applied {
			reapplied++
		}
	}
	return release, reapplied, nil
}

// rewriteTail moves the damaged tail of sc out of the ledger (cut) and
// appends the carried lines again. It returns the damaged bytes' file.
func (l *Ledger) rewriteTail(sc *ledgerScan, carried []ledgerLine) (string, error) {
	damaged, err := l.cut(sc)
	if err != nil {
		return damaged, err
	}
	if err := l.appendLines(carried, true); err != nil {
		return damaged, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	return damaged, nil
}

// recordMissing appends to the ledger, in id order, the committed forgets
// of the database it lacks (but those a compaction of the ledger, header,
// dropped), and returns how many.
func (s *Eraser) recordMissing(ctx context.Context, header *LedgerHeader) (int, error) {
	l := s.opts.Ledger
	db, err := committedForgets(ctx, s.db)
	if err != nil {
		return 0, err
	}
	var missing []shredd.ID
	for id, f := range db {
		if !f.alias && !l.Has(id) && !compacted(header, f) {
			missing = append(missing, id)
		}
	}
	slices.SortFunc(missing, func(a, b shredd.ID) int { return bytes.Compare(a[:], b[:]) })
	// Not kept as records here: reconcileRecords kept those that still
	// matter (the ones no epoch has shredded yet).
	if err := appendLedger(ctx, s, missing, false); err != nil {
		return 0, err
	}
	return len(missing), nil
}

// finishCheck writes the ledger's header when it has none, then marks the
// ledger checked.
func (l *Ledger) finishCheck() error {
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

// reapply commits a forget of the ledger again in a database that lacks
// it. A forget of the same subject the database already has (made after
// the restore) is left as it is: the subject's key is destroyed either way,
// and applied is false (it is not counted as re-applied).
func (s *Eraser) reapply(ctx context.Context, id shredd.ID, sid envelope.SID, e ledgerLine) (applied bool, err error) {
	defer s.reg.LockSubject(sid)()
	var other []byte
	err = s.db.QueryRowContext(ctx, `SELECT id FROM forgets WHERE sid=? AND state<>? LIMIT 1`, sid[:], shredd.StateRequested).Scan(&other)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM forgets WHERE id=? AND state=?`, id[:], shredd.StateRequested); err != nil {
		return false, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	req := &forgetRequest{at: time.Unix(0, e.RequestedAt), commitment: e.Commitment, deadline: time.Unix(0, e.Deadline)}
	_, err = s.commit(ctx, id, sid, req)
	if errors.Is(err, errLost) {
		return false, nil // another forget of the subject, left requested: commitRequested finishes it
	}
	return true, err
}

// keptHead reads the head kept with the root for this ledger: nil and no
// error when none was kept, or when the root keeps forget records instead
// (s.records; the slot is then unused: the local root keeps one head).
func (s *Eraser) keptHead(ctx context.Context) (*ledger.Head, error) {
	if s.records != nil {
		return nil, nil
	}
	return keptHeadOf(ctx, s.keys.Root())
}

// HeadStream is the stream under which the forget ledger's head is kept
// with the root (ledger.KeepHead): in a local root file, where v1 files
// kept it in a field of their own (keystore/local.LegacyHeadStream).
const HeadStream = "forget-ledger"

// keptHeadOf reads the ledger's head kept with root: nil and no error
// when none was kept.
func keptHeadOf(ctx context.Context, root keystore.RootStore) (*ledger.Head, error) {
	var h ledger.Head
	found, err := ledger.ReadHead(ctx, root, HeadStream, &h)
	if err != nil || !found {
		return nil, err
	}
	return &h, nil
}

// cut moves the damaged tail of sc out of the ledger: its bytes are kept
// in a new file beside it (path.damaged-<time>, mode 0600), then the
// ledger is cut back to its intact part (a damaged header: the file is
// started again with a new header). It returns the new file's name.
func (l *Ledger) cut(sc *ledgerScan) (string, error) {
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
	if sc.header == nil {
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
		l.apply(&ledgerScan{header: sc.header, headerHash: sc.headerHash, lines: sc.lines, seq: sc.seq, head: sc.head, end: sc.end})
		for id := range ids { // the carried lines, appended next
			l.ids[id] = l.ids[id] || ids[id]
		}
	}
	l.allocated = 0
	return aside, nil
}

// KeepLedgerHead records the ledger's head in the local root file, where a
// restore of the database cannot roll it back. Called at start-up, after
// every epoch, before every backup, when the background work finds the
// head moved, and at shutdown. Without a ledger, with a damaged one, or
// with a root store that keeps forget records instead (Vault), it does
// nothing.
func (s *Eraser) KeepLedgerHead(ctx context.Context) error {
	return s.keepLedgerHead(ctx, true)
}

func (s *Eraser) keepLedgerHead(ctx context.Context, always bool) error {
	l := s.opts.Ledger
	if l == nil || s.records != nil {
		return nil
	}
	l.headMu.Lock()
	defer l.headMu.Unlock()
	l.mu.Lock()
	h, ok := l.headLocked()
	checked := l.checked
	l.mu.Unlock()
	// Never the head of a ledger the start-up did not accept: a refused
	// start must not teach the root a truncated ledger.
	if !ok || !checked || !always && l.kept != nil && *l.kept == h {
		return nil
	}
	if err := ledger.KeepHead(ctx, s.keys.Root(), HeadStream, h); err != nil {
		return fmt.Errorf("erasure: keep the forget ledger's head with the root: %w", err)
	}
	crashpoint.Hit("ledger:headkept")
	l.kept = &h
	return nil
}

// CompactLedger drops the ledger's first lines committed under root
// versions below minVersion (destroyed by an epoch): a database from
// before them is refused at start-up anyway. The lines dropped are a
// prefix, so the chain still verifies from the header, which records how
// many were dropped and the last one's hash; the file is rewritten through
// a fresh file and a rename (datadir.Replace). The head is then kept with
// the root, whether anything was dropped or not (once per epoch).
func (s *Eraser) CompactLedger(ctx context.Context, minVersion int) (int, error) {
	l := s.opts.Ledger
	if l == nil {
		return 0, nil
	}
	dropped, err := l.compact(minVersion)
	if err != nil {
		return 0, err
	}
	if _, err := s.records.drop(ctx, minVersion); err != nil {
		return dropped, err
	}
	if err := s.KeepLedgerHead(ctx); err != nil {
		return dropped, err
	}
	return dropped, nil
}

func (l *Ledger) compact(minVersion int) (int, error) {
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
	if sc.header == nil || len(sc.damaged) > 0 {
		return 0, nil // new, or damaged: ReconcileLedger's at the next start
	}
	n := 0
	for n < len(sc.lines) && sc.lines[n].RootVersion < minVersion {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	h := *sc.header
	c := LedgerCompaction{}
	if h.Compacted != nil {
		c = *h.Compacted
	}
	c.Lines += uint64(n)
	c.Seq, c.Head = sc.lines[n-1].Seq, sc.hashes[n-1]
	c.Below = max(c.Below, minVersion)
	for _, e := range sc.lines[:n] {
		c.Until = max(c.Until, e.CommittedAt)
	}
	h.Compacted = &c
	var out bytes.Buffer
	out.Write(l.encodeHeader(h))
	out.WriteByte('\n')
	// The kept lines verbatim: their seq and prev still chain.
	start := int64(len(bytes.SplitN(b, []byte("\n"), 2)[0])) + 1
	for _, e := range sc.lines[:n] {
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
	if nsc.header == nil || len(nsc.damaged) > 0 || nsc.seq != sc.seq {
		return 0, fmt.Errorf("%w: %s does not verify after compaction", shredd.ErrLedger, l.path)
	}
	l.apply(&nsc)
	l.synced = l.written // the new file holds every line written, fsynced
	return n, nil
}

// nullString is s, or NULL when s is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
