package keystore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// EvictChannel is the notification channel on which a forget's commit
// tells every node sharing the database to drop the subject's cached keys:
// "seq:sid" in hex, seq from table evictions; a forget group's evictions
// share a payload, their entries joined by commas.
const EvictChannel = "shredd_evict"

// HeartbeatInterval is how often a following node records itself in
// table nodes.
const HeartbeatInterval = time.Second

// evictTx records the eviction of sid in tx and notifies the other nodes,
// where nodes share the database; on SQLite the forget's own node purges
// its cache after the commit, and there is no other.
func (t *Tree) evictTx(ctx context.Context, tx *storage.Tx, sid envelope.SID, now int64) error {
	if !t.db.Shared() {
		return nil
	}
	if err := tx.Sequence(ctx); err != nil { // seqs in commit order (evictManyTx)
		return err
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO evictions(sid, at) VALUES (?, ?) RETURNING seq`, sid[:], now).Scan(&seq); err != nil {
		return err
	}
	return tx.Notify(ctx, EvictChannel, strconv.FormatInt(seq, 10)+":"+hex.EncodeToString(sid[:]))
}

// Follower keeps a node's key cache in step with the forgets other nodes
// commit, where nodes share the database (Follow), and tells a forget when
// every node's cache has let go of the forgotten keys (Converged). It
// shares its Tree's state.
type Follower struct {
	t *Tree
}

// NewFollower returns the Follower of t.
func NewFollower(t *Tree) *Follower { return &Follower{t: t} }

// Follow keeps this node's key cache in step with the forgets other nodes
// commit, where nodes share the database, until ctx ends: it purges the
// subject of each eviction notification, purges everything when
// notifications may have been lost (at the start and after the listener
// reconnects), and records the node in table nodes every
// HeartbeatInterval with its cache TTL and the newest eviction it has
// applied (the read_path_converged condition of a forget reads them).
// ready is called once the node is recorded: a node must not serve before,
// or a forget could count it out while it caches keys. On SQLite Follow
// calls ready and returns at once.
func (f *Follower) Follow(ctx context.Context, node string, log *slog.Logger, ready func()) error {
	if !f.t.db.Shared() {
		ready()
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	through := int64(-1) // newest eviction applied; -1 until the listener runs
	apply := func(payload string, lost bool) {
		if lost {
			// Every eviction committed up to seq0 is in the database: after
			// a full purge, lookups read the tombstones. Later ones arrive
			// as notifications (the listener is already registered).
			var seq0 sql.NullInt64
			err := f.t.db.QueryRowContext(ctx, `SELECT max(seq) FROM evictions`).Scan(&seq0)
			f.t.PurgeAll() // after the read: what seq0 covers is a tombstone by now
			if err != nil {
				log.Warn("key cache follower: cannot read the evictions; purged the whole cache", "error", err.Error())
				return
			}
			mu.Lock()
			through = max(through, seq0.Int64)
			mu.Unlock()
			return
		}
		// A forget group's evictions come in one payload, "seq:sid"
		// entries joined by commas (evictManyTx).
		for entry := range strings.SplitSeq(payload, ",") {
			seqText, sidHex, ok := strings.Cut(entry, ":")
			seq, err := strconv.ParseInt(seqText, 10, 64)
			b, herr := hex.DecodeString(sidHex)
			if !ok || err != nil || herr != nil || len(b) != len(envelope.SID{}) {
				f.t.PurgeAll() // a payload this release does not read: be safe
				return
			}
			var sid envelope.SID
			copy(sid[:], b)
			f.t.Purge(sid)
			mu.Lock()
			through = max(through, seq)
			mu.Unlock()
		}
	}
	listenErr := make(chan error, 1)
	go func() { listenErr <- f.t.db.Listen(ctx, EvictChannel, apply) }()
	started := f.t.now().UnixNano()
	tick := time.NewTicker(HeartbeatInterval / 10) // fast until the first heartbeat
	defer tick.Stop()
	for beats := 0; ; {
		mu.Lock()
		t := through
		mu.Unlock()
		if t >= 0 {
			err := f.heartbeat(ctx, node, started, t)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("node heartbeat failed", "error", err.Error())
			case err == nil && ready != nil:
				ready()
				ready = nil
				tick.Reset(HeartbeatInterval)
			}
			if beats++; err == nil && beats%pruneEvery == 0 {
				if err := f.prune(ctx, node); err != nil && ctx.Err() == nil {
					log.Warn("pruning the rows of dead nodes failed", "error", err.Error())
				}
			}
		}
		select {
		case <-ctx.Done():
			<-listenErr
			// A node that stops leaves the table: it caches nothing more.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_, _ = f.t.db.ExecContext(dctx, `DELETE FROM nodes WHERE id=?`, node)
			return nil
		case <-tick.C:
		}
	}
}

func (f *Follower) heartbeat(ctx context.Context, node string, started, through int64) error {
	_, err := f.t.db.ExecContext(ctx, `INSERT INTO nodes(id, started_at, heartbeat_at, cache_ttl, evicted_through) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET heartbeat_at=excluded.heartbeat_at, cache_ttl=excluded.cache_ttl,
		evicted_through=excluded.evicted_through`, node, started, f.t.now().UnixNano(), int64(f.t.ttl), through)
	return err
}

// pruneEvery is how many heartbeats apart a node prunes the rows of dead
// nodes (Follower.prune).
const pruneEvery = 5

// silentSlack is how long after a node's last heartbeat it may still have
// cached a key: its next heartbeat was due one HeartbeatInterval later, and
// one more covers a heartbeat slowed by the database (Converged).
const silentSlack = 2 * HeartbeatInterval

// prune deletes the rows of table nodes that can no longer matter to any
// forget: those whose last heartbeat, silentSlack and their cache TTL have
// all passed. Converged counts such a node out for every forget, whenever
// it committed (an entry it cached lives one TTL after it went silent), so
// no forget still waits on it; its row would stay for ever otherwise (a
// node killed with SIGKILL never deletes its own). A node that was only
// frozen records itself again at its next heartbeat.
func (f *Follower) prune(ctx context.Context, self string) error {
	_, err := f.t.db.ExecContext(ctx, `DELETE FROM nodes WHERE id<>? AND heartbeat_at + cache_ttl + ? < ?`,
		self, int64(silentSlack), f.t.now().UnixNano())
	if err != nil {
		return fmt.Errorf("keystore: prune nodes: %w", err)
	}
	return nil
}

// Convergence is Converged's answer for one forget: whether the read path
// converged, and why not, or what holds.
type Convergence struct {
	OK  bool
	Why string
}

// Converged reports, for each forget (of subject sids[i], committed at
// committed[i]), whether every node's key cache has let go of the
// subject's keys as of now: each node recorded in table nodes has applied
// the forget's eviction, or its cache TTL has passed since the commit (an
// entry lives at most that long, whether its node got the notification,
// missed it, or died). Without nodes recorded (SQLite: the one node purged
// its cache at the commit) only the TTL counts. The nodes and the
// subjects' last evictions are one statement (one round trip, one
// snapshot), for one forget or a group commit's.
func (f *Follower) Converged(ctx context.Context, sids []envelope.SID, committed []time.Time, now time.Time) ([]Convergence, error) {
	out := make([]Convergence, len(sids))
	if !f.t.db.Shared() {
		for i := range sids {
			out[i] = Convergence{true, "the cache TTL has passed"}
			if tprop := committed[i].Add(f.t.ttl); now.Before(tprop) {
				out[i] = Convergence{false, fmt.Sprintf("other nodes may serve the cached key until %s (cache TTL)", tprop.UTC().Format(time.RFC3339))}
			}
		}
		return out, nil
	}
	nodes, last, err := f.nodesAndEvictions(ctx, sids)
	if err != nil {
		return nil, err
	}
	for i, sid := range sids {
		seq, evicted := last[sid]
		var waiting int
		until := committed[i]
		for _, n := range nodes {
			if evicted && n.through >= seq {
				continue // applied the eviction
			}
			// A node that went silent (died, or froze) cached its last keys
			// before its next heartbeat was due; each lives one TTL at most.
			from := committed[i]
			if silent := time.Unix(0, n.beat).Add(silentSlack); silent.Before(from) {
				from = silent
			}
			if end := from.Add(time.Duration(n.ttl)); now.Before(end) {
				waiting++
				until = maxTime(until, end)
			}
		}
		// A node serves only once it is recorded here (Follow's ready).
		out[i] = Convergence{true, fmt.Sprintf("every node (%d) has applied the eviction or passed its cache TTL", len(nodes))}
		if waiting > 0 {
			out[i] = Convergence{false, fmt.Sprintf("%d of %d nodes have not applied the eviction; they may serve the cached key until %s (cache TTL)",
				waiting, len(nodes), until.UTC().Format(time.RFC3339))}
		}
	}
	return out, nil
}

// nodeRow is a row of table nodes, as Converged reads it.
type nodeRow struct {
	beat, ttl, through int64
}

// nodesAndEvictions reads the nodes and, by subject of sids, the seq of
// its last eviction (absent: none), in one statement. (PostgreSQL types a
// union's columns pair by pair from the left: the typed branch first.)
func (f *Follower) nodesAndEvictions(ctx context.Context, sids []envelope.SID) ([]nodeRow, map[envelope.SID]int64, error) {
	args := make([]any, len(sids))
	for i, sid := range sids {
		args[i] = sid[:]
	}
	rows, err := f.t.db.QueryContext(ctx, `SELECT id, heartbeat_at, cache_ttl, evicted_through, NULL AS sid FROM nodes
		UNION ALL SELECT NULL, 0, 0, max(seq), sid FROM evictions WHERE sid IN (`+marks(len(sids))+`) GROUP BY sid`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("keystore: converged: %w", err)
	}
	defer rows.Close()
	var nodes []nodeRow
	last := map[envelope.SID]int64{}
	for rows.Next() {
		var id sql.NullString
		var n nodeRow
		var sidb []byte
		if err := rows.Scan(&id, &n.beat, &n.ttl, &n.through, &sidb); err != nil {
			return nil, nil, fmt.Errorf("keystore: converged: %w", err)
		}
		if id.Valid {
			nodes = append(nodes, n)
			continue
		}
		var sid envelope.SID
		copy(sid[:], sidb)
		last[sid] = n.through
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("keystore: converged: %w", err)
	}
	return nodes, last, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// LiveNodes returns the nodes recorded in table nodes of db with a
// heartbeat at or after since.
func LiveNodes(ctx context.Context, db *storage.DB, since time.Time) ([]string, error) {
	out, err := storage.Column[string](ctx, db, `SELECT id FROM nodes WHERE heartbeat_at >= ? ORDER BY id`, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("keystore: nodes: %w", err)
	}
	return out, nil
}
