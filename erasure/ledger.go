package erasure

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
)

// LabelLedger is the domain-separation label of the forget ledger's MAC key,
// derived from the subject secret (LedgerKey).
const LabelLedger = "shredd/v1/forget-ledger"

// Ledger is the durable trace every forget leaves outside the database: an
// append-only file with one authenticated line per committed forget (its
// id, sid, key generation, times, commitment and the root version it was
// committed under), fsynced before the forget is answered. A database
// restored from a backup lacks the forgets committed after the backup;
// ReconcileLedger finds them in the ledger and commits them again, so a
// restore never brings a forgotten subject back. The file names no raw
// subject id (sids are keyed hashes, as in the database).
//
// Entries under a root version the root store has since destroyed are
// never needed again (a backup older than that version is refused), and
// Compact drops them.
type Ledger struct {
	path string
	key  []byte

	mu      sync.Mutex // guards f's writes, ids and written
	f       *os.File
	ids     map[shredd.ID]bool // forgets durably in the ledger
	written uint64             // appends written to f

	// Concurrent appends share fsyncs: each waits until an fsync that began
	// after its write has returned (group commit).
	syncMu sync.Mutex
	synced uint64 // appends known durable; guarded by syncMu
}

// ledgerLine is one line of the ledger file.
type ledgerLine struct {
	Forget      string `json:"forget"`
	SID         string `json:"sid"`
	Gen         uint32 `json:"gen"`
	RequestedAt int64  `json:"requested_at"`
	CommittedAt int64  `json:"committed_at"`
	Deadline    int64  `json:"deadline"`
	Commitment  string `json:"commitment,omitempty"`
	RootVersion int    `json:"root_version"`
	LogSize     int64  `json:"log_size,omitempty"` // the transparency log's size when the forget was answered
	MAC         string `json:"mac,omitempty"`
}

// LedgerKey derives the ledger's MAC key from the subject secret.
func LedgerKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(LabelLedger))
	return m.Sum(nil)
}

func (l *Ledger) mac(e ledgerLine) string {
	e.MAC = ""
	b, _ := json.Marshal(e)
	m := hmac.New(sha256.New, l.key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// OpenLedger opens (creating, mode 0600) the ledger file at path. The file
// is never followed through a symlink.
func OpenLedger(path string, key []byte) (*Ledger, error) {
	f, err := openLedgerFile(path)
	if err != nil {
		return nil, err
	}
	l := &Ledger{path: path, key: key, f: f, ids: map[shredd.ID]bool{}}
	entries, err := l.read()
	if err != nil {
		f.Close()
		return nil, err
	}
	for _, e := range entries {
		id, _ := shredd.ParseID(e.Forget)
		l.ids[id] = true
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

// read returns the ledger's entries. A last line without its newline is a
// write a crash interrupted before its fsync returned (its forget was never
// answered): it is cut off. Any other bad line is ErrLedger.
func (l *Ledger) read() ([]ledgerLine, error) {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	b, err := io.ReadAll(l.f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		if err := l.f.Truncate(int64(i + 1)); err != nil {
			return nil, fmt.Errorf("%w: cut a torn last line: %v", shredd.ErrLedger, err)
		}
		b = b[:i+1]
	}
	var out []ledgerLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<10)
	for n := 1; sc.Scan(); n++ {
		var e ledgerLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || !hmac.Equal([]byte(e.MAC), []byte(l.mac(e))) {
			return nil, fmt.Errorf("%w: %s line %d does not verify", shredd.ErrLedger, l.path, n)
		}
		if _, err := shredd.ParseID(e.Forget); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: bad forget id", shredd.ErrLedger, l.path, n)
		}
		if s, err := hex.DecodeString(e.SID); err != nil || len(s) != len(envelope.SID{}) {
			return nil, fmt.Errorf("%w: %s line %d: bad sid", shredd.ErrLedger, l.path, n)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	return out, nil
}

// Has reports whether the ledger holds the forget.
func (l *Ledger) Has(id shredd.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id]
}

// Len returns the number of forgets in the ledger.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// appendAll writes the lines of forgets not yet in the ledger and fsyncs
// them once.
func (l *Ledger) appendAll(lines []ledgerLine) error {
	l.mu.Lock()
	var buf bytes.Buffer
	var ids []shredd.ID
	for _, e := range lines {
		id, err := shredd.ParseID(e.Forget)
		if err != nil {
			l.mu.Unlock()
			return err
		}
		if l.ids[id] {
			continue
		}
		e.MAC = l.mac(e)
		b, _ := json.Marshal(e) // strings and numbers only
		buf.Write(append(b, '\n'))
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		l.mu.Unlock()
		return nil
	}
	if _, err := l.f.Write(buf.Bytes()); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: append: %v", shredd.ErrLedger, err)
	}
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
			return fmt.Errorf("%w: fsync: %v", shredd.ErrLedger, err)
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

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

// ledgerAppend records committed forgets in the ledger, when the service
// has one; it returns once they are durable (an fsync shared with the
// forgets appended at the same time).
func (s *Service) ledgerAppend(ctx context.Context, ids ...shredd.ID) error {
	l := s.opts.Ledger
	if l == nil {
		return nil
	}
	ids = slices.DeleteFunc(slices.Clone(ids), l.Has)
	if len(ids) == 0 {
		return nil
	}
	// The newest root version the database's bucket keys were wrapped under
	// when the forgets committed: a backup taken before them needs that
	// version or an older one (read from the database, not the root store:
	// a forget must not wait for Vault).
	rootVersion, err := s.keys.BucketRootVersion(ctx)
	if err != nil {
		return fmt.Errorf("erasure: forget ledger: %w", err)
	}
	// The log's size now: checkpoints up to it may have been handed out, so
	// a database whose log is shorter was restored from an older copy.
	var logSize int64
	if j := s.opts.Journal; j != nil {
		if logSize, err = j.Log().Size(ctx); err != nil {
			return fmt.Errorf("erasure: forget ledger: %w", err)
		}
	}
	lines := make([]ledgerLine, 0, len(ids))
	for _, id := range ids {
		var sid []byte
		var requested, deadline int64
		var committed, gen sql.NullInt64
		var commitment sql.NullString
		if err := s.db.QueryRowContext(ctx, `SELECT sid, gen, requested_at, committed_at, deadline, commitment FROM forgets WHERE id=?`, id[:]).
			Scan(&sid, &gen, &requested, &committed, &deadline, &commitment); err != nil {
			return fmt.Errorf("erasure: forget ledger: %w", err)
		}
		lines = append(lines, ledgerLine{Forget: id.String(), SID: hex.EncodeToString(sid), Gen: uint32(gen.Int64),
			RequestedAt: requested, CommittedAt: committed.Int64, Deadline: deadline, Commitment: commitment.String, RootVersion: rootVersion, LogSize: logSize})
	}
	if err := l.appendAll(lines); err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	return nil
}

// LedgerReport says what ReconcileLedger did.
type LedgerReport struct {
	Reapplied int // forgets of the ledger the database lacked, committed again
	Recorded  int // committed forgets of the database the ledger lacked, appended
	// LogRewound is set when the database's transparency log (of LogSize
	// entries) is shorter than it was when a forget of the ledger was
	// answered (LedgerLogSize): the database was restored from an older
	// copy, and checkpoints handed out above LogSize do not verify against
	// it.
	LogRewound    bool
	LogSize       int64
	LedgerLogSize int64
}

// ReconcileLedger makes the database and the forget ledger agree before
// serving: a forget in the ledger that the database lacks (the database was
// restored from a backup taken before it) is committed again with its id,
// times and commitment, destroying the subject's key in the restored
// database; a committed forget missing from the ledger (a crash between the
// commit and the ledger's fsync) is appended. Without a ledger it does
// nothing.
func (s *Service) ReconcileLedger(ctx context.Context) (LedgerReport, error) {
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
	l.mu.Lock()
	entries, err := l.read()
	l.mu.Unlock()
	if err != nil {
		return rep, err
	}
	if j := s.opts.Journal; j != nil {
		size, err := j.Log().Size(ctx)
		if err != nil {
			return rep, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		for _, e := range entries {
			rep.LedgerLogSize = max(rep.LedgerLogSize, e.LogSize)
		}
		rep.LogSize, rep.LogRewound = size, size < rep.LedgerLogSize
	}
	have := map[shredd.ID]bool{}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM forgets WHERE state<>?`, shredd.StateRequested)
	if err != nil {
		return rep, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return rep, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		var id shredd.ID
		copy(id[:], b)
		have[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	inLedger := map[shredd.ID]bool{}
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for _, e := range entries {
		id, _ := shredd.ParseID(e.Forget)
		inLedger[id] = true
		if have[id] {
			continue
		}
		if release == nil {
			if release, err = s.db.Exclusive(ctx, "erasure.work"); err != nil {
				return rep, fmt.Errorf("erasure: forget ledger: %w: %w", shredd.ErrUnavailable, err)
			}
		}
		var sid envelope.SID
		b, _ := hex.DecodeString(e.SID)
		copy(sid[:], b)
		applied, err := s.reapply(ctx, id, sid, e)
		if err != nil {
			return rep, err
		}
		if applied {
			rep.Reapplied++
		}
	}
	var missing []shredd.ID
	for id := range have {
		if !inLedger[id] {
			missing = append(missing, id)
		}
	}
	if err := s.ledgerAppend(ctx, missing...); err != nil {
		return rep, err
	}
	rep.Recorded = len(missing)
	return rep, nil
}

// reapply commits a forget of the ledger again in a database that lacks
// it. A forget of the same subject the database already has (made after
// the restore) is left as it is: the subject's key is destroyed either way,
// and applied is false (it is not counted as re-applied).
func (s *Service) reapply(ctx context.Context, id shredd.ID, sid envelope.SID, e ledgerLine) (applied bool, err error) {
	defer s.barrier.Lock(sid)()
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
	return true, s.commit(ctx, id, sid, req)
}

// CompactLedger drops the ledger's entries committed under root versions
// below minVersion (destroyed by an epoch): a database from before them is
// refused at start-up anyway. The file is rewritten through a fresh file and
// a rename (datadir.Replace).
func (s *Service) CompactLedger(ctx context.Context, minVersion int) (int, error) {
	l := s.opts.Ledger
	if l == nil {
		return 0, nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	entries, err := l.read()
	if err != nil {
		return 0, err
	}
	var keep bytes.Buffer
	dropped := 0
	ids := map[shredd.ID]bool{}
	for _, e := range entries {
		if e.RootVersion < minVersion {
			dropped++
			continue
		}
		b, _ := json.Marshal(e)
		keep.Write(append(b, '\n'))
		id, _ := shredd.ParseID(e.Forget)
		ids[id] = true
	}
	if dropped == 0 {
		return 0, nil
	}
	if err := datadir.Replace(l.path, keep.Bytes(), datadir.Secret); err != nil {
		return 0, fmt.Errorf("%w: compact: %v", shredd.ErrLedger, err)
	}
	f, err := openLedgerFile(l.path)
	if err != nil {
		return 0, err
	}
	l.f.Close()
	l.f, l.ids = f, ids
	l.synced = l.written // the new file holds every line written, fsynced
	return dropped, nil
}

// nullString is s, or NULL when s is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
