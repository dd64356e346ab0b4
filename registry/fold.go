package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
)

// The registry's side of the registration WAL (wal.go): the tail of
// registrations acknowledged and not yet folded into the tables, the
// folder that moves them there, and Fold, which readers call to see every
// acknowledged registration in the tables.
//
// Who sees a registration from the moment it is acknowledged:
//   - the readers by artifact (Registered, ArtifactHolder, ParentsOf)
//     consult the tail, then the tables: a registration leaves the tail
//     only after its fold committed;
//   - the readers by subject or by parent (the cascade, the preview, the
//     lists, verification, attestation, Settle) and a forget's commit call
//     Fold first, which returns once every registration acknowledged
//     before the call is in the tables. A forget holds its subject's
//     barrier lock across Fold and its commit: a registration carrying the
//     subject is either acknowledged before the lock (and folded before the
//     barrier is read) or refused after the commit.

const (
	// foldChunk bounds the registrations of one fold transaction: large
	// enough that the COMMIT is a small part of it, small enough that a
	// forget's commit does not wait long behind it for the write lock.
	foldChunk = 2048
	// maxTail bounds the registrations acknowledged and not yet folded;
	// past it the writer waits for the folder (the tail lives in memory).
	maxTail = 1 << 17
	// DefaultWALRetain bounds the folded segments the WAL keeps for a
	// restore when the newest backup is older than them.
	DefaultWALRetain = 1 << 30
	// foldDelay is how long the folder lets registrations gather before
	// it folds them, unless a reader waits (Fold) or the tail is full: a
	// fold is a transaction with its COMMIT, and folding each group as it
	// comes would spend one per group again.
	foldDelay = 50 * time.Millisecond
	// foldRetry is the pause after a failed fold.
	foldRetry = 200 * time.Millisecond
	// maxLiveCache bounds the subjects the writer remembers as live.
	maxLiveCache = 1 << 20
)

// walState is the WAL, its tail and the folder's progress.
type walState struct {
	db        *storage.DB
	live      Liveness
	stop      <-chan struct{} // closed by the registry's Close
	kickFlush func()          // asks the registry's pageFlusher to flush the database's pages
	w         *wal
	segMu     sync.Mutex // w's segments: the writer appends, the folder removes
	retain    int64
	log       *slog.Logger
	root      keystore.RootStore // keeps the mark (mark.go); nil for none
	stream    string             // the mark's name there

	markMu sync.Mutex // keepMark, one at a time
	mark   Mark       // the mark as last read or kept
	markAt time.Time  // when it kept it last
	// markFound: the root store holds a mark (read at open, or kept
	// since); until then the first keepMark writes one even at seq 0, so
	// that the mark's absence later means it was lost.
	markFound bool

	mu       sync.Mutex
	tail     []*walRecord                // acknowledged, not folded, in order
	byID     map[shredd.ID]*Registration // the tail by artifact
	acked    uint64                      // the last acknowledged sequence number
	folded   uint64                      // the last folded one
	foldedCh chan struct{}               // closed (and replaced) when folded moves or a fold fails
	foldErr  error                       // the last fold's error, nil once one succeeds
	markErr  error                       // the last failure to keep the mark, nil once one succeeds
	// markFailedAt is when keeping the mark began to fail (the first
	// failure since the last success).
	markFailedAt time.Time
	room         chan struct{}           // signalled when the tail shrinks (the writer waits on it)
	frame        []byte                  // the writer's frame buffer
	liveGen      map[envelope.SID]uint32 // subjects seen live at a generation (the writer's cache)
	liveMu       sync.Mutex              // liveGen
	kick         chan struct{}           // wakes the folder
	demand       chan struct{}           // a reader waits (Fold) or the tail is full: fold now
	done         chan struct{}           // closed when the folder returns
}

// openWALState opens the registration WAL of s (Options.WALDir), folds
// what the tables lack (a crash or a restore left it there) and starts the
// folder.
func openWALState(ctx context.Context, s *Registry) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO registry_wal(id, folded) VALUES (1, 0) ON CONFLICT(id) DO NOTHING`); err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	var folded int64
	if err := s.db.QueryRowContext(ctx, `SELECT folded FROM registry_wal WHERE id=1`).Scan(&folded); err != nil {
		return fmt.Errorf("registry: wal: %w", err)
	}
	w, recs, warnings, err := openWAL(s.opts.WALDir, s.opts.WALKey, s.opts.SegmentBytes, uint64(folded))
	if err != nil {
		return err
	}
	log := s.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, m := range warnings {
		log.Warn(m)
	}
	ws := &walState{db: s.db, live: s.live, stop: s.stop, kickFlush: s.kickFlush, w: w, retain: s.opts.WALRetain, log: log,
		byID: map[shredd.ID]*Registration{}, folded: uint64(folded), acked: uint64(folded), foldedCh: make(chan struct{}),
		room: make(chan struct{}, 1), liveGen: map[envelope.SID]uint32{}, kick: make(chan struct{}, 1), demand: make(chan struct{}, 1),
		done: make(chan struct{})}
	if ws.retain <= 0 {
		ws.retain = DefaultWALRetain
	}
	if s.opts.MarkRoot != nil {
		stream := s.opts.MarkStream
		if stream == "" {
			stream = MarkStream
		}
		m, found, err := ReadMark(ctx, s.opts.MarkRoot, stream)
		if err != nil {
			return err
		}
		ws.root, ws.stream, ws.mark, ws.markFound = s.opts.MarkRoot, stream, m, found
	}
	for i := range recs {
		ws.tail = append(ws.tail, &recs[i])
		ws.byID[recs[i].reg.ID] = &recs[i].reg
		ws.acked = recs[i].seq
	}
	s.ws = ws
	if len(recs) > 0 {
		log.Info("registration WAL: folding registrations a restart or a restore left unfolded", "registrations", len(recs))
	}
	// Fold what was left before serving: the readers then start from
	// complete tables, and a ledger reconciliation after Open sees them.
	if err := ws.foldAll(ctx); err != nil {
		return err
	}
	if err := ws.keepMark(ctx); err != nil {
		return err
	}
	if err := ws.pinMark(ctx); err != nil {
		return err
	}
	if _, err := ws.truncate(ctx); err != nil {
		return err
	}
	go ws.run()
	return nil
}

// Fold returns once every registration acknowledged before the call is in
// the tables (at once where the registry keeps no WAL, or nothing is
// waiting). It fails when ctx ends first or the fold fails: a reader then
// fails closed rather than read tables that lack a registration.
func (s *Registry) Fold(ctx context.Context) error { return s.ws.fold(ctx) }

// fold is Fold; a nil ws (no WAL) has nothing to fold.
func (ws *walState) fold(ctx context.Context) error {
	if ws == nil {
		return nil
	}
	ws.mu.Lock()
	target := ws.acked
	ws.mu.Unlock()
	for {
		ws.mu.Lock()
		folded, ch, ferr := ws.folded, ws.foldedCh, ws.foldErr
		ws.mu.Unlock()
		if folded >= target {
			return nil
		}
		if ferr != nil {
			return fmt.Errorf("registry: fold: %w: %w", shredd.ErrUnavailable, ferr)
		}
		ws.urge()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("registry: fold: %w", ctx.Err())
		}
	}
}

// wake tells the folder that registrations wait (it folds them within
// foldDelay).
func (ws *walState) wake() {
	select {
	case ws.kick <- struct{}{}:
	default:
	}
}

// urge tells the folder to fold now.
func (ws *walState) urge() {
	select {
	case ws.demand <- struct{}{}:
	default:
	}
	ws.wake()
}

// run folds the tail in the background whenever the writer appends,
// until Close; after a failed fold it tries again after foldRetry.
func (ws *walState) run() {
	defer close(ws.done)
	// markDue fires when registrations were acknowledged since the mark
	// was kept last: the mark is kept at most markInterval after them,
	// whether more come or not.
	markDue := time.NewTimer(time.Hour)
	markDue.Stop()
	defer markDue.Stop()
	for {
		select {
		case <-ws.stop:
			return
		case <-markDue.C:
			if err := ws.keepMark(context.Background()); err != nil {
				ws.log.Error("registration WAL: keeping its mark with the root failed; trying again", "err", err)
				markDue.Reset(markInterval)
			}
			continue
		case <-ws.kick:
		}
		if ws.root != nil {
			markDue.Reset(max(time.Until(ws.markAt.Add(markInterval)), 0))
		}
		// Let a group's worth gather, unless someone waits.
		t := time.NewTimer(foldDelay)
		select {
		case <-ws.stop:
			t.Stop()
			return
		case <-ws.demand:
		case <-t.C:
		}
		t.Stop()
		for {
			n, err := ws.foldOnce(context.Background())
			if err != nil {
				ws.log.Error("registration WAL: fold failed; trying again", "err", err)
				select {
				case <-ws.stop:
					return
				case <-time.After(foldRetry):
				}
				continue
			}
			if n == 0 {
				break
			}
			if _, err := ws.truncate(context.Background()); err != nil {
				ws.log.Error("registration WAL: removing folded segments failed", "err", err)
			}
		}
	}
}

// foldAll folds until the tail is empty or a fold fails.
func (ws *walState) foldAll(ctx context.Context) error {
	for {
		n, err := ws.foldOnce(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// foldOnce moves the oldest foldChunk registrations of the tail into the
// tables in one transaction, with the last sequence number folded, and
// returns how many it moved.
func (ws *walState) foldOnce(ctx context.Context) (int, error) {
	ws.mu.Lock()
	recs := ws.tail[:min(len(ws.tail), foldChunk)] // only the folder removes from the tail
	ws.mu.Unlock()
	if len(recs) == 0 {
		return 0, nil
	}
	if err := ws.foldIn(ctx, recs); err != nil {
		ws.mu.Lock()
		ws.foldErr = err
		close(ws.foldedCh)
		ws.foldedCh = make(chan struct{})
		ws.mu.Unlock()
		return 0, err
	}
	crashpoint.Hit("wal:folded") // in the tables, the WAL not yet trimmed
	ws.mu.Lock()
	for _, r := range recs {
		if ws.byID[r.reg.ID] == &r.reg {
			delete(ws.byID, r.reg.ID)
		}
	}
	ws.tail = ws.tail[len(recs):]
	ws.folded, ws.foldErr = recs[len(recs)-1].seq, nil
	close(ws.foldedCh)
	ws.foldedCh = make(chan struct{})
	ws.mu.Unlock()
	select {
	case ws.room <- struct{}{}:
	default:
	}
	ws.kickFlush()
	return len(recs), nil
}

// foldIn writes recs into the tables in one transaction. An artifact
// already registered (two re-registrations of one envelope, or a
// registration a restore's database already holds) keeps its rows; a kind
// the tables lack (a restore of a database older than the kind) is
// registered again, as it was when the registration was acknowledged.
func (ws *walState) foldIn(ctx context.Context, recs []*walRecord) error {
	tx, err := ws.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("registry: fold: %w", err)
	}
	defer tx.Rollback()
	kinds := map[string]bool{}
	rows := make([]recordReq, 0, len(recs))
	for _, r := range recs {
		if !kinds[r.reg.Kind] {
			kinds[r.reg.Kind] = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO kinds(name, description, created_at) VALUES (?, '', ?) ON CONFLICT(name) DO NOTHING`,
				r.reg.Kind, r.reg.At.UnixNano()); err != nil {
				return fmt.Errorf("registry: fold: %w", err)
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO artifacts(id, kind, holder, sealed, created_at, writer) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
			r.reg.ID[:], r.reg.Kind, r.reg.Holder, r.reg.Sealed, r.reg.At.UnixNano(), nullString(r.reg.Writer))
		if err != nil {
			return fmt.Errorf("registry: fold: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			continue // registered already: its rows are there
		}
		rows = append(rows, recordReq{Registration: r.reg})
	}
	if err := insertLineage(ctx, tx, rows); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE registry_wal SET folded=? WHERE id=1`, int64(recs[len(recs)-1].seq)); err != nil {
		return fmt.Errorf("registry: fold: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("registry: fold: %w", err)
	}
	return nil
}

// truncateWAL removes the segments whose registrations are folded and,
// when shredd took a backup, covered by the newest one (a restore of it
// replays the segments after it); past the retention bound the oldest
// folded segments go even so (a restore of an older backup then misses
// them, which the start-up reports). It returns how many it removed.
func (ws *walState) truncate(ctx context.Context) (int, error) {
	var backedUp *int64
	if err := ws.db.QueryRowContext(ctx, `SELECT backed_up FROM registry_wal WHERE id=1`).Scan(&backedUp); err != nil {
		return 0, fmt.Errorf("registry: wal: %w", err)
	}
	ws.mu.Lock()
	upTo := ws.folded
	ws.mu.Unlock()
	ws.segMu.Lock()
	if backedUp != nil && uint64(*backedUp) < upTo {
		upTo = max(uint64(*backedUp), ws.w.RetainedFrom(upTo, ws.retain))
	}
	removable := ws.w.Removable(upTo)
	ws.segMu.Unlock()
	if !removable {
		return 0, nil
	}
	// The mark first: once the segments are gone, only the mark says that
	// a database restored from before them lacks their registrations.
	if err := ws.keepMark(ctx); err != nil {
		return 0, err
	}
	ws.segMu.Lock()
	defer ws.segMu.Unlock()
	return ws.w.RemoveThrough(upTo)
}

// BackupPoint returns the last registration sequence number the tables
// of db hold (0 for none): read before a backup copies db, it is what the
// copy holds at least (RecordBackup).
func BackupPoint(ctx context.Context, db *storage.DB) (int64, error) {
	var folded int64
	err := db.QueryRowContext(ctx, `SELECT folded FROM registry_wal WHERE id=1`).Scan(&folded)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("registry: backup point: %w", err)
	}
	return folded, nil
}

// RecordBackup records in db that a backup holds every registration up to
// point (BackupPoint before the copy): the registration WAL keeps the
// segments after the newest such point, so that a restore of that backup
// registers again what was sealed after it. The commands that take
// backups call it once the backup is durable.
func RecordBackup(ctx context.Context, db *storage.DB, point int64) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO registry_wal(id, folded, backed_up) VALUES (1, 0, ?)
		ON CONFLICT(id) DO UPDATE SET backed_up = CASE WHEN registry_wal.backed_up IS NULL OR registry_wal.backed_up < excluded.backed_up
			THEN excluded.backed_up ELSE registry_wal.backed_up END`, point); err != nil {
		return fmt.Errorf("registry: record backup: %w", err)
	}
	return nil
}

// waitRoom waits while the tail is full (the folder is behind).
func (ws *walState) waitRoom() {
	for {
		ws.mu.Lock()
		n := len(ws.tail)
		ws.mu.Unlock()
		if n < maxTail {
			return
		}
		ws.urge()
		select {
		case <-ws.room:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkLiveCached returns the refs of the group that are not live, with
// their errors. A subject seen live at a generation is remembered until a
// forget takes its barrier lock (LockSubject forgets it): the callers hold
// the read side of every lineage subject's lock until they are answered,
// so no forget of theirs commits in between, and a forget's commit is
// visible to the read after it.
func (ws *walState) checkLiveCached(ctx context.Context, batch []recordReq) (map[envelope.Ref]error, error) {
	out := map[envelope.Ref]error{}
	seen := map[envelope.Ref]bool{}
	for i := range batch {
		for _, ref := range batch[i].Lineage {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			ws.liveMu.Lock()
			gen, ok := ws.liveGen[ref.SID]
			ws.liveMu.Unlock()
			if ok && gen == ref.Gen {
				continue
			}
			if err := ws.live.CheckLive(ctx, ws.db, []envelope.Ref{ref}); err != nil {
				if !errors.Is(err, keystore.ErrNotFound) && !errors.Is(err, keystore.ErrShredded) {
					return nil, err
				}
				out[ref] = err
				continue
			}
			ws.liveMu.Lock()
			if len(ws.liveGen) >= maxLiveCache {
				clear(ws.liveGen)
			}
			ws.liveGen[ref.SID] = ref.Gen
			ws.liveMu.Unlock()
		}
	}
	return out, nil
}

// forgetLive drops sid from the writer's cache of live subjects (a forget
// holds its barrier lock).
func (ws *walState) forgetLive(sid envelope.SID) {
	ws.liveMu.Lock()
	delete(ws.liveGen, sid)
	ws.liveMu.Unlock()
}

// get returns the registration of artifact id while it waits in the
// tail, and whether it does (never, without a WAL).
func (ws *walState) get(id shredd.ID) (Registration, bool) {
	if ws == nil {
		return Registration{}, false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	r, ok := ws.byID[id]
	if !ok {
		return Registration{}, false
	}
	return *r, true
}

// close stops the folder (the registry's writer has returned), folds
// what is left and closes the segment.
func (ws *walState) close() {
	<-ws.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = ws.foldAll(ctx) // what is left is in the WAL: the next Open folds it
	if err := ws.keepMark(ctx); err != nil {
		ws.log.Error("registration WAL: keeping its mark with the root at close failed", "err", err)
	}
	ws.segMu.Lock()
	_ = ws.w.Close()
	ws.segMu.Unlock()
}
