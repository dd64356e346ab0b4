package registry

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/storage"
)

// The registration WAL's high-water mark (docs/operations.md, "The
// registration WAL's mark"). The WAL and the database can both be rolled
// back by a restore, a copy or a lost file; the mark is kept beside the
// root (keystore.MarkKeeper), where they cannot take it with them. A start
// that finds fewer acknowledged registrations than the mark in the
// database and the WAL together is refused (CheckWAL) until they are put
// back or the loss is accepted (AcceptLoss), which the mark then records
// and every later attestation states (LostRegistrations).

// MarkStream is the name of the registration WAL's mark in a local root
// file (one data directory per file); StreamFor names it in a root store
// that many data directories share.
const MarkStream = "registrations"

// StreamFor names the registration WAL's mark of the data directory whose
// instance (the transparency log's origin, "shredd/<hex>") is instance,
// in a root store of kind kind: MarkStream in a local root file, which
// serves one data directory; MarkStream-<hex> in a shared one (Vault).
func StreamFor(kind, instance string) string {
	if kind == "local" {
		return MarkStream
	}
	_, id, _ := strings.Cut(instance, "/")
	return MarkStream + "-" + id
}

// markInterval is how often the folder keeps the mark while registrations
// come in. The mark is also kept before any segment is removed and when
// the registry closes, so that what the interval leaves out is only what
// a crash interrupts while its segments are still on disk.
const markInterval = time.Second

// markGrace is how long registrations are still acknowledged while the
// mark cannot be kept (a Vault failover, a disk that fills and is freed):
// they are in the next mark kept. Past it, registrations are refused
// (503) until the mark is kept again; /readyz answers 503 from the first
// failure.
const markGrace = 30 * time.Second

// ErrWALBehind means the database and the registration WAL together hold
// fewer registrations than shredd acknowledged (the mark kept with the
// root): a restore, a lost database or lost segments dropped some.
var ErrWALBehind = errors.New("acknowledged registrations missing")

// ErrMarkMissing means the database pins a mark kept with the root, and
// the root store holds none: it was lost, and nothing says what was
// acknowledged.
var ErrMarkMissing = errors.New("the registration WAL's mark is gone from the root store")

// ErrWALForeign means the WAL holds, at the mark, a frame other than the
// one acknowledged there: another copy's segments. Accepting a loss does
// not apply; putting back this data directory's own segments does.
var ErrWALForeign = errors.New("the WAL's segments are another copy's")

// Mark is the registration WAL's high-water mark.
type Mark struct {
	// Seq is the sequence number of the last registration acknowledged
	// when the mark was kept (0: none).
	Seq uint64 `json:"seq"`
	// MAC is the MAC of the WAL frame that ends at Seq (hex), when a
	// segment held it: a WAL that holds other registrations at Seq (a copy
	// that went its own way) is told apart from this one.
	MAC string `json:"mac,omitempty"`
	// Lost are the registrations whose loss an operator accepted
	// (AcceptLoss), oldest first.
	Lost []LostRange `json:"lost,omitempty"`
}

// LostRange is a run of acknowledged registrations whose loss was
// accepted: their artifacts and lineage are unknown to shredd.
type LostRange struct {
	From       uint64 `json:"from"`
	To         uint64 `json:"to"`          // 0: unknown (the mark itself was lost)
	AcceptedAt int64  `json:"accepted_at"` // Unix nanoseconds
}

// ReadMark reads the mark kept in root: ok false when none was kept (a data
// directory of an earlier release, or a root store that keeps none).
func ReadMark(ctx context.Context, root keystore.RootStore, stream string) (Mark, bool, error) {
	var m Mark
	found, err := ledger.ReadHead(ctx, root, stream, &m)
	switch {
	case errors.Is(err, keystore.ErrCorrupt):
		return Mark{}, false, fmt.Errorf("registry: the registration WAL's mark: %w", err)
	case err != nil:
		return Mark{}, false, fmt.Errorf("registry: the registration WAL's mark %s could not be read from the %s root store: %w; nothing was changed: "+
			"let the root store answer, and grant shredd's token the policy of docs/operations.md (with Vault: read, create and update on the KV mount's shredd/<key>/marks/*)",
			stream, root.Kind(), err)
	}
	return m, found, nil
}

func keepMark(ctx context.Context, root keystore.RootStore, stream string, m Mark) error {
	if !ledger.Keeps(root) || stream == "" {
		return nil
	}
	if err := ledger.KeepHead(ctx, root, stream, m); err != nil {
		return fmt.Errorf("registry: keep the registration WAL's mark with the root: %w (shredd's token needs the policy of docs/operations.md, marks/ included)", err)
	}
	return nil
}

// String names the run for people: "5 to 8", or "from 5 on (how many is
// unknown)" when the mark itself was lost.
func (l LostRange) String() string {
	if l.To == 0 {
		return fmt.Sprintf("from %d on (how many is unknown: the mark kept with the root was lost)", l.From)
	}
	return fmt.Sprintf("%d to %d", l.From, l.To)
}

// LostRegistrations returns the runs of registrations whose loss was
// accepted (AcceptLoss), as the mark kept with the root records them.
func LostRegistrations(ctx context.Context, root keystore.RootStore, stream string) ([]LostRange, error) {
	m, _, err := ReadMark(ctx, root, stream)
	return m.Lost, err
}

// walCoverage is what the database and the WAL hold: the database every
// registration up to folded, the segments theirs.
type walCoverage struct {
	folded uint64
	segs   []ledger.SegmentCover // First..Last of each, in order
	macAt  map[uint64][]byte
}

// missing returns the first run of registrations up to seq that neither
// the database nor a segment holds (ok false when none is missing).
func (c walCoverage) missing(seq uint64) (from, to uint64, ok bool) {
	from = c.held() + 1
	if from > seq {
		return 0, 0, false
	}
	to = seq
	for _, s := range c.segs {
		if s.Last >= s.First && s.First > from {
			return from, min(s.First-1, seq), true // the run ends where the next segment starts
		}
	}
	return from, to, true
}

// held returns the last sequence number the database and the WAL hold
// without a gap.
func (c walCoverage) held() uint64 {
	next := c.folded + 1
	for _, s := range c.segs {
		if s.Last < s.First || s.Last < next {
			continue
		}
		if s.First > next {
			break
		}
		next = s.Last + 1
	}
	return next - 1
}

// readCoverage reads, changing nothing, the last folded sequence number of
// db and the registrations the segments in dir hold. A segment whose
// frames stop at damage counts up to its last whole frame.
func readCoverage(ctx context.Context, db *storage.DB, dir string, key []byte) (walCoverage, error) {
	var c walCoverage
	var folded int64
	err := db.QueryRowContext(ctx, `SELECT folded FROM registry_wal WHERE id=1`).Scan(&folded)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("registry: wal: %w", err)
	}
	c.folded, c.macAt = uint64(folded), map[uint64][]byte{}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return c, nil // the open makes it
	}
	segs, macs, err := walConfig(dir, key, 0, 0).Cover()
	if err != nil {
		return c, err
	}
	for i, seg := range segs {
		if macs[i] != nil {
			c.macAt[seg.Last] = macs[i]
		}
	}
	c.segs = segs
	return c, nil
}

// CheckWAL compares, changing nothing, the registrations the database db
// and the WAL in dir hold with the mark kept with root, and refuses
// (ErrWALBehind) when shredd acknowledged registrations that neither
// holds, naming them and the fix. A WAL whose frame at the mark is not the
// one the mark names (another copy's segments) is refused too. Without a
// mark there is nothing to check. The start runs it before it folds,
// removes or writes anything.
func CheckWAL(ctx context.Context, db *storage.DB, root keystore.RootStore, stream, dir string, key []byte) error {
	m, found, err := ReadMark(ctx, root, stream)
	if err != nil {
		return err
	}
	if ledger.Keeps(root) && !found {
		pinned, err := markPinned(ctx, db)
		if err != nil {
			return err
		}
		if pinned {
			return fmt.Errorf("registry: the database says the registration WAL's mark is kept with the %s root store, but it holds none: %w; "+
				"nothing was changed. The root store lost it (a KV mount emptied or made anew, the mark deleted, root.key replaced or edited): "+
				"put back the root store's contents (Vault: restore its storage from a snapshot; local: the live root.key), "+
				"or, if no registration is missing, run shredd wal accept-loss, which keeps a new mark and records that registrations after what the database and wal/ hold may be lost",
				root.Kind(), ErrMarkMissing)
		}
	}
	return CheckWALMark(ctx, db, m, dir, key)
}

// ParseMark parses a mark as a root store keeps it (for the commands that
// read the root file without opening it as a store).
func ParseMark(b []byte) (Mark, error) {
	var m Mark
	if err := json.Unmarshal(b, &m); err != nil {
		return Mark{}, fmt.Errorf("registry: the registration WAL's mark: %w: %v", keystore.ErrCorrupt, err)
	}
	return m, nil
}

// CheckWALMark is CheckWAL against the mark m.
func CheckWALMark(ctx context.Context, db *storage.DB, m Mark, dir string, key []byte) error {
	c, err := readCoverage(ctx, db, dir, key)
	if err != nil || m.Seq == 0 {
		return err
	}
	if from, to, miss := c.missing(m.Seq); miss {
		return &BehindError{From: from, To: to, Mark: m.Seq, Folded: c.folded, Dir: dir}
	}
	if mac, ok := c.macAt[m.Seq]; ok && m.MAC != "" && hex.EncodeToString(mac) != m.MAC {
		return fmt.Errorf("registry: %s holds other registrations at %d than the ones shredd acknowledged (the mark kept with the root names another frame): %w; "+
			"nothing was changed. These segments are another copy's: put back this data directory's own %s", dir, m.Seq, ErrWALForeign, dir)
	}
	return nil
}

// BehindError is CheckWAL's refusal of registrations acknowledged and held
// neither by the database nor by the WAL. It wraps ErrWALBehind.
type BehindError struct {
	From, To uint64 // the first run of registrations missing
	Mark     uint64 // the last acknowledged, as the mark says
	Folded   uint64 // the last the database holds
	Dir      string // the WAL's folder
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("registry: registrations %d to %d were acknowledged (the mark kept with the root says %d were) but are neither in the database (it holds up to %d) nor in %s: %v; "+
		"nothing was changed. Put back the segments of %s, or the database that holds them (shredd restore of the newest backup), "+
		"or, to go on without them, run shredd wal accept-loss, which records the loss with the root and states it in every later erasure attestation",
		e.From, e.To, e.Mark, e.Folded, e.Dir, ErrWALBehind, e.Dir)
}

func (e *BehindError) Unwrap() error { return ErrWALBehind }

// AcceptLoss records with root that the registrations the database db and
// the WAL in dir lack, up to the mark, are lost: the mark is lowered to
// what they hold and the run is added to its Lost list, which every later
// erasure attestation states. It returns the run (zero when nothing is
// missing). For shredd wal accept-loss, with the data directory's lock
// held.
func AcceptLoss(ctx context.Context, db *storage.DB, root keystore.RootStore, stream, dir string, key []byte, now time.Time) (LostRange, error) {
	m, found, err := ReadMark(ctx, root, stream)
	if err != nil {
		return LostRange{}, err
	}
	c, err := readCoverage(ctx, db, dir, key)
	if err != nil {
		return LostRange{}, err
	}
	held := c.held()
	var lost LostRange
	switch pinned, err := markPinned(ctx, db); {
	case err != nil:
		return LostRange{}, err
	case !found && pinned:
		// The mark itself was lost: how many registrations came after
		// what the database and the WAL hold is unknown (To 0).
		lost = LostRange{From: held + 1, AcceptedAt: now.UnixNano()}
	case !found:
		return LostRange{}, nil
	default:
		if _, _, miss := c.missing(m.Seq); !miss {
			return LostRange{}, nil
		}
		lost = LostRange{From: held + 1, To: m.Seq, AcceptedAt: now.UnixNano()}
	}
	m.Lost = append(m.Lost, lost)
	m.Seq, m.MAC = held, ""
	if mac, ok := c.macAt[held]; ok {
		m.MAC = hex.EncodeToString(mac)
	}
	if err := keepMark(ctx, root, stream, m); err != nil {
		return LostRange{}, err
	}
	return lost, nil
}

// keepMark keeps the WAL's mark with the root: the last acknowledged
// registration and its frame's MAC, and the losses accepted before. It
// never lowers the mark. A failure is kept in markErr (Healthy reports it)
// and returned.
func (ws *walState) keepMark(ctx context.Context) error {
	if ws.root == nil {
		return nil
	}
	ws.markMu.Lock()
	defer ws.markMu.Unlock()
	ws.segMu.Lock()
	seq := ws.w.Next() - 1
	mac := hex.EncodeToString(ws.w.LastMAC())
	ws.segMu.Unlock()
	if ws.markFound && (seq < ws.mark.Seq || seq == ws.mark.Seq && (mac == ws.mark.MAC || mac == "")) {
		return nil // kept already (or lowered by an accepted loss: never raised back over it here)
	}
	m := ws.mark
	m.Seq, m.MAC = seq, mac
	err := keepMark(ctx, ws.root, ws.stream, m)
	ws.mu.Lock()
	if err != nil && ws.markErr == nil {
		ws.markFailedAt = time.Now()
	}
	ws.markErr = err
	ws.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	ws.mark, ws.markAt, ws.markFound = m, time.Now(), true
	crashpoint.Hit("wal:markkept")
	return nil
}

// markPin is the database's pin (storage.DB.PinSecrets) that says the
// registration WAL's mark is kept with the root, under the stream it
// names: a root store that then holds no mark (its KV mount emptied, the
// mark deleted, a root file edited) is a refused start, not a data
// directory that checks nothing.
const markPin = "wal-mark"

// pinMark pins in the database that the mark is kept with the root.
func (ws *walState) pinMark(ctx context.Context) error {
	if ws.root == nil || !ws.markFound {
		return nil
	}
	pinned, err := markPinned(ctx, ws.db)
	if err != nil || pinned {
		return err
	}
	if err := ws.db.PinSecrets(ctx, map[string]string{markPin: ws.stream}, time.Now()); err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	return nil
}

// markPinned reports whether db pins a kept mark (pinMark).
func markPinned(ctx context.Context, db *storage.DB) (bool, error) {
	pins, err := db.SecretPins(ctx)
	if err != nil {
		return false, fmt.Errorf("registry: wal: %w", err)
	}
	_, ok := pins[markPin]
	return ok, nil
}

// WriteErr returns why registrations cannot be made durable now, or nil:
// the WAL refuses appends after a failed write or sync, the last fold
// failed, or the mark could not be kept with the root. GET /readyz answers
// 503 while it is not nil. A registry without a WAL has nothing to report.
func (s *Registry) WriteErr() error {
	ws := s.ws
	if ws == nil {
		return nil
	}
	ws.segMu.Lock()
	broken := ws.w.Broken()
	ws.segMu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case broken != nil:
		return broken
	case ws.foldErr != nil:
		return ws.foldErr
	}
	return ws.markErr
}
