package erasure

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
)

// Forget records: with a root store that keeps them (keystore.RecordKeeper,
// the Vault root store), every committed forget is also written there,
// in groups, as an authenticated record. A restore of the database cannot
// roll the root store back, and no node's disk holds the only copy: any
// node that starts — on a restored database, with a new disk — commits
// again the forgets the records hold and the database lacks
// (ReconcileLedger). The local forget ledger stays, as the embedded
// default's trace and a cache of the records.
const (
	// LabelRecord is the label of a forget record's MAC, under LedgerKey.
	LabelRecord = "shredd/v1/forget-record"
	// RecordFormat names a forget record's format.
	RecordFormat = "shredd-forget-record/v1"
	// maxRecordLines bounds the lines of one record (each about 450
	// bytes; Vault refuses requests above 32 MiB, KV secrets are better
	// kept small).
	maxRecordLines = 1000
)

// forgetRecord is one record: the ledger lines of a group of committed
// forgets (without the ledger's chain: Seq and Prev are zero).
type forgetRecord struct {
	Format string        `json:"format"`
	Lines  []ledger.Line `json:"lines"`
	MAC    string        `json:"mac"`
}

// records keeps forget records with the root store and remembers which
// forgets it knows kept. Writes that failed (the root store was down) are
// kept pending and written again by the background work.
type records struct {
	keeper keystore.RecordKeeper
	key    []byte

	mu      sync.Mutex
	kept    map[shredd.ID]bool // forgets in a record read or written by this process
	pending []ledger.Line      // lines whose record could not be written yet
	loaded  bool               // the records were read at start-up (ReconcileLedger)
	dropped int                // the root's oldest available version when records were last dropped below it
	checked time.Time          // when the root's versions were last read for that
}

// newRecords returns the records of root, or nil when the root store
// keeps none or there is no ledger (whose key authenticates them).
func newRecords(root keystore.RootStore, l *ledger.Lines) *records {
	k, ok := root.(keystore.RecordKeeper)
	if !ok || l == nil {
		return nil
	}
	return &records{keeper: k, key: l.Key(), kept: map[shredd.ID]bool{}}
}

func (r *records) mac(lines []ledger.Line) string {
	b, _ := json.Marshal(lines)
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(LabelRecord))
	m.Write([]byte{0})
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// recordName names a record by the root version its lines were committed
// under (a prefix: the records an epoch made useless are found by name
// alone), then random bytes.
func recordName(rootVersion int) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%08x-%s", rootVersion, hex.EncodeToString(b))
}

// nameVersion is the root version a record's name carries (-1: not a
// record's name).
func nameVersion(name string) int {
	v, _, ok := strings.Cut(name, "-")
	n, err := strconv.ParseUint(v, 16, 31)
	if !ok || err != nil || len(v) != 8 {
		return -1
	}
	return int(n)
}

// keepTimeout bounds a forget's wait for its record: a root store that
// hangs must not hold forgets' answers (the record is retried).
const keepTimeout = 2 * time.Second

// keep writes records of lines (one per root version and maxRecordLines),
// lines not yet known kept only. A failed write keeps its lines pending
// and returns the error; while lines are pending (the root store failed
// and the background work has not written them yet), new lines join them
// without a call, so that an outage delays no forget's answer.
func (r *records) keep(ctx context.Context, lines []ledger.Line) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	lines = slices.DeleteFunc(slices.Clone(lines), func(e ledger.Line) bool {
		id, _ := shredd.ParseID(e.Forget)
		return r.kept[id]
	})
	if len(r.pending) > 0 {
		r.pending = append(r.pending, lines...)
		r.mu.Unlock()
		return errRecordsPending
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	for len(lines) > 0 {
		n := 1
		for n < len(lines) && n < maxRecordLines && lines[n].RootVersion == lines[0].RootVersion {
			n++
		}
		if err := r.write(ctx, lines[:n]); err != nil {
			r.mu.Lock()
			r.pending = append(r.pending, lines...)
			r.mu.Unlock()
			return err
		}
		lines = lines[n:]
	}
	return nil
}

func (r *records) write(ctx context.Context, lines []ledger.Line) error {
	out := make([]ledger.Line, len(lines))
	for i, e := range lines {
		e.Seq, e.Prev, e.MAC = 0, "", ""
		out[i] = e
	}
	b, err := json.Marshal(forgetRecord{Format: RecordFormat, Lines: out, MAC: r.mac(out)})
	if err != nil {
		return err
	}
	if err := r.keeper.KeepRecord(ctx, recordName(lines[0].RootVersion), b); err != nil {
		return fmt.Errorf("erasure: forget record: %w", err)
	}
	r.mu.Lock()
	for _, e := range lines {
		id, _ := shredd.ParseID(e.Forget)
		r.kept[id] = true
	}
	r.mu.Unlock()
	return nil
}

// errRecordsPending: lines joined the pending ones without a call.
var errRecordsPending = errors.New("erasure: forget records pending: the root store failed before")

// retry writes the pending lines again (the background work).
func (r *records) retry(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	p := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(p) == 0 {
		return nil
	}
	return r.keep(ctx, p)
}

// ErrRecord means a forget record kept with the root store failed its
// authentication or could not be parsed: something other than shredd
// wrote it, or it was made with another subject secret.
var ErrRecord = errors.New("forget record not authentic")

// load reads every record kept and returns their lines, in name order,
// after checking each record's MAC; a record that fails is refused
// (ErrRecord), never applied. Records of root versions below minVersion
// are skipped (a database from before them is refused anyway).
func (r *records) load(ctx context.Context, minVersion int) ([]ledger.Line, error) {
	names, err := r.keeper.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget records: %w", err)
	}
	slices.Sort(names)
	var lines []ledger.Line
	for _, name := range names {
		if v := nameVersion(name); v >= 0 && v < minVersion {
			continue
		}
		b, err := r.keeper.ReadRecord(ctx, name)
		if errors.Is(err, keystore.ErrNotFound) {
			continue // dropped by another node's compaction meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("erasure: forget records: %w", err)
		}
		var rec forgetRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.Format != RecordFormat || len(rec.Lines) == 0 ||
			!hmac.Equal([]byte(rec.MAC), []byte(r.mac(rec.Lines))) {
			return nil, fmt.Errorf("%w: record %s of the root store", ErrRecord, name)
		}
		for _, e := range rec.Lines {
			if _, err := shredd.ParseID(e.Forget); err != nil || !validSID(e.SID) {
				return nil, fmt.Errorf("%w: record %s of the root store", ErrRecord, name)
			}
		}
		lines = append(lines, rec.Lines...)
	}
	r.mu.Lock()
	for _, e := range lines {
		id, _ := shredd.ParseID(e.Forget)
		r.kept[id] = true
	}
	r.loaded = true
	r.mu.Unlock()
	return lines, nil
}

func validSID(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// known reports whether the forget is known kept.
func (r *records) known(id shredd.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kept[id]
}

// drop deletes the records of root versions below minVersion (after an
// epoch destroyed them: a database from before is refused at start-up).
func (r *records) drop(ctx context.Context, minVersion int) (int, error) {
	if r == nil {
		return 0, nil
	}
	names, err := r.keeper.Records(ctx)
	if err != nil {
		return 0, fmt.Errorf("erasure: forget records: %w", err)
	}
	n := 0
	for _, name := range names {
		if v := nameVersion(name); v >= 0 && v < minVersion {
			if err := r.keeper.DropRecord(ctx, name); err != nil {
				return n, fmt.Errorf("erasure: forget records: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// reconcileRecords reads the forget records kept with the root store and
// commits again the forgets the database (db) lacks, under the work lock
// of every node (release, as reapplyAll); then it keeps as records the
// database's committed forgets that no record holds and no epoch has
// shredded yet (a database from before a shredded forget is refused at
// start-up). A record that is not authentic refuses the start; a root
// store that cannot be read leaves rep.RecordsErr, and the background
// work reads the records once it can (records.loaded).
func reconcileRecords(ctx context.Context, s *Eraser, db map[shredd.ID]ledger.Known, rep *LedgerReport, release *func()) error {
	r := s.records
	if r == nil {
		return nil
	}
	v, err := s.keys.Root().Versions(ctx)
	if err != nil {
		rep.RecordsErr = err
		return nil
	}
	lines, err := r.load(ctx, v.MinAvailable)
	if errors.Is(err, ErrRecord) {
		return fmt.Errorf("%w; nothing was changed: remove the record from the root store's KV mount once you know where it came from (docs/scale-out.md, \"Nothing a node must keep\")", err)
	}
	if err != nil {
		rep.RecordsErr = err
		return nil
	}
	var n int
	*release, n, err = s.reapplyAll(ctx, lines, db, *release)
	if err != nil {
		return err
	}
	rep.Reapplied += n
	rep.FromRecords = n
	now, err := committedForgets(ctx, s.db)
	if err != nil {
		return err
	}
	var missing []shredd.ID
	for id, f := range now {
		if f.State == shredd.StateCommitted && !r.known(id) {
			missing = append(missing, id)
		}
	}
	slices.SortFunc(missing, func(a, b shredd.ID) int { return strings.Compare(a.String(), b.String()) })
	if len(missing) == 0 {
		return nil
	}
	mlines, err := s.ledgerLines(ctx, missing)
	if err != nil {
		return err
	}
	if err := r.keep(ctx, mlines); err != nil {
		rep.RecordsErr = err
	}
	return nil
}

// syncRecords is the background work's part of the records: read them
// (and commit again what the database lacks) when the start-up could not,
// and write the pending ones.
func syncRecords(ctx context.Context, s *Eraser) error {
	r := s.records
	if r == nil {
		return nil
	}
	r.mu.Lock()
	loaded := r.loaded
	r.mu.Unlock()
	if !loaded {
		rep, err := s.Recovery().ReconcileLedger(ctx)
		if err == nil {
			err = rep.RecordsErr
		}
		if err != nil {
			return err
		}
	}
	if err := r.retry(ctx); err != nil {
		return err
	}
	return dropUseless(ctx, s)
}

// dropInterval is how often the background work reads the root's versions
// to drop the records an epoch made useless.
const dropInterval = 10 * time.Second

// dropUseless drops the records of root versions an epoch destroyed (on
// any node: whichever sees the new oldest version first).
func dropUseless(ctx context.Context, s *Eraser) error {
	r := s.records
	r.mu.Lock()
	due := time.Since(r.checked) >= dropInterval
	if due {
		r.checked = time.Now()
	}
	r.mu.Unlock()
	if !due {
		return nil
	}
	v, err := s.keys.Root().Versions(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	grew := v.MinAvailable > r.dropped
	r.mu.Unlock()
	if !grew {
		return nil
	}
	if _, err := r.drop(ctx, v.MinAvailable); err != nil {
		return err
	}
	r.mu.Lock()
	r.dropped = v.MinAvailable
	r.mu.Unlock()
	return nil
}
