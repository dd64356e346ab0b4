package translog

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/storage"
)

// A Log is the transparency log kept in a database. Its methods are safe
// for concurrent use; appends are serialised by the database's write lock.
type Log struct {
	db     *storage.DB
	signer note.Signer

	mu        sync.Mutex
	cacheSize int64  // tree size of cached, valid when cached != nil
	cached    []byte // the last signed checkpoint

	staples staples // witness cosignatures (staple.go)
}

// Open returns the log kept in db, in the tables log_meta, log_entries and
// log_hashes that storage/sqlite's migrations make (entries and the stored
// hashes of golang.org/x/mod/sumdb/tlog are keyed by an INTEGER PRIMARY
// KEY, so a point read, MAX(idx) and a range of entries are B-tree lookups:
// an append costs O(log n)). The log's origin is signer.Name();
// it is recorded on first use, and opening the same database with a
// signer of another name is an error wrapping [ErrOrigin].
func Open(ctx context.Context, db *storage.DB, signer note.Signer) (*Log, error) {
	if signer == nil || signer.Name() == "" {
		return nil, errors.New("translog: open: signer without a name")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("translog: open: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO log_meta (k, v) VALUES ('origin', ?) ON CONFLICT DO NOTHING`, signer.Name()); err != nil {
		return nil, fmt.Errorf("translog: open: %w", err)
	}
	var origin string
	if err := tx.QueryRowContext(ctx, `SELECT v FROM log_meta WHERE k = 'origin'`).Scan(&origin); err != nil {
		return nil, fmt.Errorf("translog: open: %w", err)
	}
	if origin != signer.Name() {
		return nil, fmt.Errorf("translog: open: %w: the database holds log %q, the signer is %q", ErrOrigin, origin, signer.Name())
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("translog: open: %w", err)
	}
	return &Log{db: db, signer: signer}, nil
}

// Origin returns the origin of the log, the name of its signer.
func (l *Log) Origin() string { return l.signer.Name() }

// Append appends entry to the log inside tx, the caller's transaction, and
// returns its index. The entry is visible, and counted in checkpoints,
// only once tx commits; if tx rolls back the log is unchanged. The entry
// is stored verbatim. An empty entry or one larger than [MaxEntrySize] is
// an error wrapping [ErrTooLarge].
//
// tx should hold the database's write lock (shredd's database begins
// transactions IMMEDIATE), so that the tree size read in tx stays the
// size until commit; otherwise a concurrent append makes one of the two
// fail rather than corrupt the log.
func (l *Log) Append(ctx context.Context, tx *storage.Tx, entry []byte) (index int64, err error) {
	first, err := l.AppendBatch(ctx, tx, [][]byte{entry})
	if err != nil {
		return 0, err
	}
	return first, nil
}

// AppendBatch appends entries in order inside tx, like [Log.Append], and
// returns the index of the first. Nothing is written unless every entry
// has a valid size. The hashes needed by the next append (the right edge
// of the tree, at most one per level) are kept in memory during the
// batch, so a batch of k entries costs O(k) writes and O(log n) reads.
func (l *Log) AppendBatch(ctx context.Context, tx *storage.Tx, entries [][]byte) (first int64, err error) {
	for i, e := range entries {
		if len(e) == 0 || len(e) > MaxEntrySize {
			return 0, fmt.Errorf("translog: append: entry %d of %d bytes: %w", i, len(e), ErrTooLarge)
		}
	}
	// The log is one sequence: its size is read, and its entries
	// numbered, under the sequence lock (storage.Tx.Sequence), so that
	// two writers that commit side by side never take the same index.
	if err := tx.Sequence(ctx); err != nil {
		return 0, fmt.Errorf("translog: append: %w", err)
	}
	n, err := treeSize(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("translog: append: %w", err)
	}
	if len(entries) == 0 {
		return n, nil
	}
	w := &batchWriter{ctx: ctx, tx: tx}
	if err := w.seedEdge(n); err != nil {
		return 0, fmt.Errorf("translog: append: %w", err)
	}
	r := &hashReader{ctx: ctx, q: tx, edge: &w.edge}
	for i, e := range entries {
		idx := n + int64(i)
		hashes, err := tlog.StoredHashes(idx, e, r)
		if err != nil {
			return 0, fmt.Errorf("translog: append: %w", err)
		}
		if err := w.add(idx, e, hashes); err != nil {
			return 0, fmt.Errorf("translog: append: %w", err)
		}
	}
	if err := w.flush(); err != nil {
		return 0, fmt.Errorf("translog: append: %w", err)
	}
	return n, nil
}

// batchRows is how many rows one INSERT statement of a batch writes:
// multi-row inserts cut the per-statement cost of large batches, and
// 3 × 300 bound parameters stay far below SQLite's variable limit.
const batchRows = 300

// batchWriter buffers the rows of an append batch and writes them with
// multi-row INSERTs.
type batchWriter struct {
	ctx     context.Context
	tx      *storage.Tx
	entries []any // idx, data pairs
	hashes  []any // idx, hash pairs
	edge    edge
}

// edge holds, for each level, the last node of the tree written at that
// level during a batch: exactly the hashes the next append reads.
type edge [64]struct {
	ok bool
	n  int64
	h  tlog.Hash
}

// seedEdge reads, in one statement, the hashes of the complete subtrees
// that end a tree of n entries (one for each bit set in n) into the edge:
// they are the only hashes stored before the batch that its entries
// combine with (tlog.StoredHashes), which read them one level at a time
// otherwise, a statement for each run of levels.
func (w *batchWriter) seedEdge(n int64) error {
	var idx []int64
	var levels []int
	for l := 0; l < len(w.edge) && n>>l > 0; l++ {
		if (n>>l)&1 == 1 {
			idx = append(idx, tlog.StoredHashIndex(l, (n>>l)-1))
			levels = append(levels, l)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	hs, err := (&hashReader{ctx: w.ctx, q: w.tx}).ReadHashes(idx)
	if err != nil {
		return err
	}
	for i, l := range levels {
		w.edge[l].ok, w.edge[l].n, w.edge[l].h = true, (n>>l)-1, hs[i]
	}
	return nil
}

func (w *batchWriter) add(idx int64, entry []byte, hashes []tlog.Hash) error {
	w.entries = append(w.entries, idx, entry)
	base := tlog.StoredHashIndex(0, idx)
	for level, h := range hashes {
		w.hashes = append(w.hashes, base+int64(level), h[:])
		w.edge[level].ok, w.edge[level].n, w.edge[level].h = true, idx>>level, h
	}
	if len(w.entries) >= 2*batchRows || len(w.hashes) >= 2*batchRows {
		return w.flush()
	}
	return nil
}

func (w *batchWriter) flush() error {
	if err := insertRows(w.ctx, w.tx, "log_entries (idx, data)", w.entries); err != nil {
		return err
	}
	if err := insertRows(w.ctx, w.tx, "log_hashes (idx, hash)", w.hashes); err != nil {
		return err
	}
	w.entries, w.hashes = w.entries[:0], w.hashes[:0]
	return nil
}

// insertRows inserts pairs of values into table in statements of at most
// batchRows rows.
func insertRows(ctx context.Context, tx *storage.Tx, table string, args []any) error {
	for len(args) > 0 {
		k := min(len(args), 2*batchRows)
		q := "INSERT INTO " + table + " VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?),", k/2), ",")
		if _, err := tx.ExecContext(ctx, q, args[:k]...); err != nil {
			return err
		}
		args = args[k:]
	}
	return nil
}

// treeSize returns the number of entries in the log as seen by q.
func treeSize(ctx context.Context, q storage.Querier) (int64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(idx), -1) + 1 FROM log_entries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("tree size: %w", err)
	}
	return n, nil
}

// hashReader is the tlog.HashReader of the stored hashes seen by q,
// looking first in the in-memory edge of a batch when it has one.
type hashReader struct {
	ctx  context.Context
	q    storage.Querier
	edge *edge
}

// readChunk bounds the number of variables of one SELECT.
const readChunk = 500

func (r *hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int // positions in indexes to read from the database
	for i, x := range indexes {
		if r.edge != nil {
			if level, n := tlog.SplitStoredHashIndex(x); level < len(r.edge) && r.edge[level].ok && r.edge[level].n == n {
				out[i] = r.edge[level].h
				continue
			}
		}
		missing = append(missing, i)
	}
	for len(missing) > 0 {
		chunk := missing[:min(len(missing), readChunk)]
		missing = missing[len(chunk):]
		args := make([]any, len(chunk))
		for j, i := range chunk {
			args[j] = indexes[i]
		}
		q := `SELECT idx, hash FROM log_hashes WHERE idx IN (` + strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",") + `)`
		rows, err := r.q.QueryContext(r.ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("read hashes: %w", err)
		}
		found := make(map[int64]tlog.Hash, len(chunk))
		for rows.Next() {
			var idx int64
			var b []byte
			if err := rows.Scan(&idx, &b); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read hashes: %w", err)
			}
			if len(b) != tlog.HashSize {
				rows.Close()
				return nil, fmt.Errorf("read hashes: stored hash %d has %d bytes", idx, len(b))
			}
			found[idx] = tlog.Hash(b)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("read hashes: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read hashes: %w", err)
		}
		for _, i := range chunk {
			h, ok := found[indexes[i]]
			if !ok {
				return nil, fmt.Errorf("read hashes: stored hash %d: %w", indexes[i], ErrNotFound)
			}
			out[i] = h
		}
	}
	return out, nil
}

// Size returns the number of entries in the log (committed ones only).
func (l *Log) Size(ctx context.Context) (int64, error) {
	n, err := treeSize(ctx, l.db)
	if err != nil {
		return 0, fmt.Errorf("translog: %w", err)
	}
	return n, nil
}

// Entry returns the entry at index, verbatim. An index outside the tree
// is an error wrapping [ErrNotFound].
func (l *Log) Entry(ctx context.Context, index int64) ([]byte, error) {
	var data []byte
	err := l.db.QueryRowContext(ctx, `SELECT data FROM log_entries WHERE idx = ?`, index).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("translog: entry %d: %w", index, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("translog: entry %d: %w", index, err)
	}
	return data, nil
}

// Checkpoint returns the signed checkpoint of the tree at its current
// size (C2SP tlog-checkpoint, signed as a note), followed by the witness
// cosignatures stapled to that tree ([Log.AddCosignature]). The last one
// signed is cached, so calls without appends in between cost one query.
func (l *Log) Checkpoint(ctx context.Context) ([]byte, error) {
	n, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	return l.checkpointAt(ctx, n)
}

// checkpointAt returns a signed checkpoint of the tree of size n <= Size.
// The log is append-only: the hashes of a committed tree never change, so
// they need no transaction to be read consistently.
func (l *Log) checkpointAt(ctx context.Context, n int64) ([]byte, error) {
	l.mu.Lock()
	if l.cached != nil && l.cacheSize == n {
		signed := l.cached
		l.mu.Unlock()
		return l.staple(bytes.Clone(signed), n), nil
	}
	l.mu.Unlock()
	h, err := tlog.TreeHash(n, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return nil, fmt.Errorf("translog: checkpoint %d: %w", n, err)
	}
	c := Checkpoint{Origin: l.Origin(), Size: n, Hash: h}
	signed, err := note.Sign(&note.Note{Text: c.String()}, l.signer)
	if err != nil {
		return nil, fmt.Errorf("translog: checkpoint %d: sign: %w", n, err)
	}
	l.mu.Lock()
	if l.cached == nil || n >= l.cacheSize {
		l.cached, l.cacheSize = signed, n
	}
	l.mu.Unlock()
	return l.staple(bytes.Clone(signed), n), nil
}

// Prove returns a c2sp.org/tlog-proof@v1 inclusion proof of the entry at
// index, against a checkpoint of the current tree, or of the tree of size
// treeSize when treeSize > 0 (signed now). An index or treeSize beyond
// the tree is an error wrapping [ErrNotFound].
func (l *Log) Prove(ctx context.Context, index, treeSize int64) ([]byte, error) {
	size, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	if treeSize == 0 {
		treeSize = size
	}
	if treeSize < 0 || treeSize > size {
		return nil, fmt.Errorf("translog: prove: tree size %d of %d: %w", treeSize, size, ErrNotFound)
	}
	if index < 0 || index >= treeSize {
		return nil, fmt.Errorf("translog: prove: index %d in tree %d: %w", index, treeSize, ErrNotFound)
	}
	hashes, err := tlog.ProveRecord(treeSize, index, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return nil, fmt.Errorf("translog: prove %d in %d: %w", index, treeSize, err)
	}
	cp, err := l.checkpointAt(ctx, treeSize)
	if err != nil {
		return nil, err
	}
	p := &Proof{Index: index, Hashes: hashes, Checkpoint: cp}
	return p.Marshal(), nil
}

// ProveConsistency returns the RFC 6962 §2.1.2 consistency proof that the
// tree of size newSize extends the tree of size oldSize, for
// 0 <= oldSize <= newSize <= Size; other sizes are an error wrapping
// [ErrNotFound]. The proof is empty when oldSize is 0 or equals newSize.
func (l *Log) ProveConsistency(ctx context.Context, oldSize, newSize int64) (tlog.TreeProof, error) {
	size, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	if oldSize < 0 || oldSize > newSize || newSize > size {
		return nil, fmt.Errorf("translog: prove consistency %d..%d of %d: %w", oldSize, newSize, size, ErrNotFound)
	}
	if oldSize == 0 || oldSize == newSize {
		return tlog.TreeProof{}, nil
	}
	p, err := tlog.ProveTree(newSize, oldSize, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return nil, fmt.Errorf("translog: prove consistency %d..%d: %w", oldSize, newSize, err)
	}
	return p, nil
}

// ReadTile returns the C2SP tlog-tiles resource at path, relative to the
// log's prefix: a hash tile "tile/<L>/<N>[.p/<W>]" (height 8: the
// concatenated hashes of the nodes at tree level 8L) or an entry bundle
// "tile/entries/<N>[.p/<W>]" (each entry as a big-endian uint16 length
// then its bytes). A full tile is served once the tree covers all of it; a
// partial tile of width W once the tree has at least W hashes (or
// entries) in it, so that a client holding an older checkpoint can still
// fetch the partial tiles of that tree. A tile beyond the tree is an error
// wrapping [ErrNotFound]; a malformed path one wrapping [ErrFormat].
func (l *Log) ReadTile(ctx context.Context, path string) ([]byte, error) {
	t, err := ParseTilePath(path)
	if err != nil {
		return nil, err
	}
	size, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	avail := size // nodes at the tile's bottom level
	if t.L > 0 {
		avail = 0
		if shift := TileHeight * t.L; shift < 63 {
			avail = size >> shift
		}
	}
	if t.N > (avail-int64(t.W))/TileWidth || avail < int64(t.W) {
		return nil, fmt.Errorf("translog: tile %s in tree %d: %w", path, size, ErrNotFound)
	}
	if t.L >= 0 {
		data, err := tlog.ReadTileData(t, &hashReader{ctx: ctx, q: l.db})
		if err != nil {
			return nil, fmt.Errorf("translog: tile %s: %w", path, err)
		}
		return data, nil
	}
	start := t.N * TileWidth
	rows, err := l.db.QueryContext(ctx, `SELECT idx, data FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx`, start, start+int64(t.W))
	if err != nil {
		return nil, fmt.Errorf("translog: tile %s: %w", path, err)
	}
	defer rows.Close()
	var b bytes.Buffer
	next := start
	for rows.Next() {
		var idx int64
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, fmt.Errorf("translog: tile %s: %w", path, err)
		}
		if idx != next || len(data) > MaxEntrySize {
			return nil, fmt.Errorf("translog: tile %s: entry %d missing or corrupt", path, next)
		}
		b.Write(binary.BigEndian.AppendUint16(nil, uint16(len(data))))
		b.Write(data)
		next++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("translog: tile %s: %w", path, err)
	}
	if next != start+int64(t.W) {
		return nil, fmt.Errorf("translog: tile %s: entry %d missing", path, next)
	}
	return b.Bytes(), nil
}
