package vault_test

// The Vault root store against a 3-node Vault Raft cluster
// (vaulttest.StartCluster): the active node is killed with SIGKILL under
// load and at each step of an epoch. The store fails closed (ErrRootUnavailable,
// nothing else) while no node serves, recovers by itself once a new leader
// is elected, and every epoch rotates the root exactly once.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/roottest"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// clusterAddrs lists the nodes of c in the given order, comma-separated, as
// --vault-addr takes them.
func clusterAddrs(nodes ...*vaulttest.Node) string {
	var as []string
	for _, n := range nodes {
		as = append(as, n.Addr)
	}
	return strings.Join(as, ",")
}

// deadAddr is an http address on which nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	return addr
}

// hang bounds a wait on a state: long enough that only a hang reaches it,
// even on a loaded machine. A bound on a wait, never a timing assertion.
const hang = 3 * time.Minute

// eventually polls f until it returns nil, failing the test after hang.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, hang, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// randomKeys returns n random 32-byte keys (crypto/rand.Read never fails).
func randomKeys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 32)
		_, _ = rand.Read(out[i])
	}
	return out
}

// TestClusterConformance runs the root store suite on a cluster with an
// address list that starts with a dead address and a standby: every call
// moves on to a node that serves it.
func TestClusterConformance(t *testing.T) {
	c := vaulttest.StartCluster(t, 3)
	ctx := context.Background()
	a := c.Active()
	addrs := deadAddr(t) + "," + clusterAddrs(append(c.Standbys(), a)...)
	roottest.Run(t, func(t *testing.T) (keystore.RootStore, func() keystore.RootStore) {
		return openReopen(t, ctx, vault.Config{Address: addrs, Token: c.RootToken, Key: newKeyName()})
	})
}

func TestAddressList(t *testing.T) {
	for _, bad := range []string{"http://127.0.0.1:8200,", ",http://127.0.0.1:8200", "http://a:1,,http://b:2", "http://a:1, "} {
		if _, err := vault.New(vault.Config{Address: bad, Token: "t"}); !errors.Is(err, shredd.ErrInvalid) {
			t.Errorf("address %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := vault.New(vault.Config{Address: " http://a:1 , https://b:8200", Token: "t"}); err != nil {
		t.Errorf("two addresses: %v", err)
	}
}

// TestClusterFailover kills the active node while stores wrap and unwrap
// keys without pause. Each store fails closed with ErrRootUnavailable and
// nothing else while no node serves it, never returns a wrong key, and
// serves again without being reopened: the store on every address and the
// store on one surviving standby once the cluster has a new leader, the
// store on the killed node alone once that node is back.
func TestClusterFailover(t *testing.T) {
	c := vaulttest.StartCluster(t, 3)
	ctx := context.Background()
	a := c.Active()
	sb := c.Standbys()
	key := newKeyName()
	if _, err := vault.Open(ctx, vault.Config{Address: a.Addr, Token: c.RootToken, Key: key}); err != nil {
		t.Fatal(err)
	}
	type loaded struct {
		name          string
		s             *vault.Root
		ok, unavail   atomic.Int64
		okAfterKill   atomic.Int64
		otherErr      atomic.Value // first error that is not ErrRootUnavailable
		wrongPlain    atomic.Bool
		failedAtLeast atomic.Bool
	}
	open := func(name, addrs string) *loaded {
		s, err := vault.Open(ctx, vault.Config{Address: addrs, Token: c.RootToken, Key: key, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return &loaded{name: name, s: s}
	}
	stores := []*loaded{
		open("every node, active first", clusterAddrs(a, sb[0], sb[1])),
		open("one standby", sb[0].Addr),
		open("the node that dies", a.Addr),
	}
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range stores {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					after := killed.Load()
					ks := randomKeys(4)
					ws, err := l.s.Wrap(ctx, ks)
					var got [][]byte
					if err == nil {
						blobs := make([][]byte, len(ws))
						for i, w := range ws {
							blobs[i] = w.Blob
						}
						got, err = l.s.Unwrap(ctx, blobs)
					}
					switch {
					case err == nil:
						for i := range ks {
							if !bytes.Equal(got[i], ks[i]) {
								l.wrongPlain.Store(true)
							}
						}
						l.ok.Add(1)
						if after {
							l.okAfterKill.Add(1)
						}
					case errors.Is(err, keystore.ErrRootUnavailable):
						l.unavail.Add(1)
						if after {
							l.failedAtLeast.Store(true)
						}
					default:
						l.otherErr.CompareAndSwap(nil, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	eventually(t, "load before the kill", func() error {
		for _, l := range stores {
			if l.ok.Load() < 3 {
				return fmt.Errorf("store %q: %d round trips", l.name, l.ok.Load())
			}
		}
		return nil
	})
	killedAt := time.Now()
	killed.Store(true)
	a.Kill()
	elected := c.Active()
	t.Logf("%s killed, %s active after %v", a.ID, elected.ID, time.Since(killedAt).Round(time.Millisecond))
	for _, l := range stores[:2] {
		eventually(t, "store on "+l.name+" after the election", func() error {
			if n := l.okAfterKill.Load(); n < 3 {
				return fmt.Errorf("%d round trips since the kill", n)
			}
			return nil
		})
	}
	// The store on the dead node alone cannot serve until it is back.
	dead := stores[2]
	before := dead.okAfterKill.Load()
	eventually(t, "store on the killed node fails closed", func() error {
		if !dead.failedAtLeast.Load() {
			return errors.New("no ErrRootUnavailable yet")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if n := dead.okAfterKill.Load(); n != before {
		t.Fatalf("store on the killed node alone: %d round trips while it was down", n-before)
	}
	a.Restart()
	eventually(t, "store on the restarted node", func() error {
		if n := dead.okAfterKill.Load(); n < before+3 {
			return fmt.Errorf("%d round trips since the restart", n-before)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	for _, l := range stores {
		if l.wrongPlain.Load() {
			t.Errorf("store on %s: an unwrap returned another key", l.name)
		}
		if e := l.otherErr.Load(); e != nil {
			t.Errorf("store on %s: error %v, want only ErrRootUnavailable while the leader is gone", l.name, e)
		}
		t.Logf("store on %s: %d round trips, %d failed closed", l.name, l.ok.Load(), l.unavail.Load())
	}
}

// killingRoot is the Vault root store with the active Vault node killed
// at one step of an epoch.
type killingRoot struct {
	*vault.Root
	c       *vaulttest.Cluster
	at      string // "rotate:before", "rotate:answer-lost", "rewrap:2", "trim:before"
	rewraps int
	fired   *vaulttest.Node
}

func (k *killingRoot) kill(step string) bool {
	if k.fired != nil || k.at != step {
		return false
	}
	k.fired = k.c.Active()
	k.fired.Kill()
	return true
}

func (k *killingRoot) Rotate(ctx context.Context) (int, error) {
	k.kill("rotate:before")
	v, err := k.Root.Rotate(ctx)
	if err == nil && k.kill("rotate:answer-lost") {
		// The rotation is committed in Vault, but its answer never reaches
		// shredd: as if the active node died before replying.
		return 0, fmt.Errorf("vault: rotate: %w: answer lost", keystore.ErrRootUnavailable)
	}
	return v, err
}

func (k *killingRoot) Rewrap(ctx context.Context, blobs [][]byte) ([]keystore.Wrapped, error) {
	k.rewraps++
	k.kill(fmt.Sprint("rewrap:", k.rewraps))
	return k.Root.Rewrap(ctx, blobs)
}

func (k *killingRoot) Trim(ctx context.Context, minVersion int) ([]int, error) {
	k.kill("trim:before")
	return k.Root.Trim(ctx, minVersion)
}

// TestClusterEpochExactlyOnce kills the active Vault node at each step of
// an epoch: before the rotation, after a rotation whose answer is lost,
// between two rewrap batches, before the trim. The epoch fails closed, is
// retried until a new leader serves, and completes exactly once: one done
// epoch, one rotation (latest version one above the epoch's start), the
// old version trimmed, every key readable under the new one.
func TestClusterEpochExactlyOnce(t *testing.T) {
	c := vaulttest.StartCluster(t, 3)
	ctx := context.Background()
	key := newKeyName()
	vs, err := vault.Open(ctx, vault.Config{Address: clusterAddrs(c.Nodes...), Token: c.RootToken, Key: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	root := &killingRoot{Root: vs, c: c}
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 512 buckets: the rewrap goes in several batches.
	ks, err := keystore.Open(ctx, db, root, keystore.Options{Buckets: 512})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[envelope.SID][]byte{}
	for i := range 64 {
		sid := envelope.SID(sha256.Sum256([]byte(fmt.Sprint("ha-subject-", i))))
		k, err := ks.Key(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		keys[sid] = bytes.Clone(k.Key)
	}
	transit := func() (latest, minAvail int, versions int) {
		t.Helper()
		sec, err := c.Client().Logical().Read("transit/keys/" + key)
		if err != nil || sec == nil {
			t.Fatalf("read transit key: %v", err)
		}
		ring, _ := sec.Data["keys"].(map[string]any)
		return vaulttest.Num(sec.Data["latest_version"]), vaulttest.Num(sec.Data["min_available_version"]), len(ring)
	}
	for _, step := range []string{"rotate:before", "rotate:answer-lost", "rewrap:2", "trim:before"} {
		t.Run(strings.ReplaceAll(step, ":", "_"), func(t *testing.T) {
			from, _, _ := transit()
			root.at, root.rewraps, root.fired = step, 0, nil
			var failures int
			var e shredd.Epoch
			eventually(t, "epoch", func() error {
				var err error
				e, err = keystore.NewShredder(ks).RunEpoch(ctx)
				if err != nil {
					if !errors.Is(err, keystore.ErrRootUnavailable) {
						t.Fatalf("epoch with the active node killed at %s: %v, want ErrRootUnavailable", step, err)
					}
					failures++
				}
				return err
			})
			if root.fired == nil {
				t.Fatalf("the active node was not killed at %s", step)
			}
			t.Logf("killed %s at %s; the epoch failed closed %d times, then completed", root.fired.ID, step, failures)
			if e.State != "done" || e.FromVersion != from || e.ToVersion != from+1 {
				t.Fatalf("epoch %+v, want done from version %d to %d", e, from, from+1)
			}
			latest, minAvail, ring := transit()
			if latest != from+1 || minAvail != from+1 || ring != 1 {
				t.Fatalf("transit key after the epoch: latest %d, min_available %d, %d versions in the ring; want one rotation: %d, %d, 1",
					latest, minAvail, ring, from+1, from+1)
			}
			var done, running, rows int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state='done'), count(*) FILTER (WHERE state='running'),
				count(*) FILTER (WHERE from_version=? AND to_version=?) FROM epochs`, from, from+1).Scan(&done, &running, &rows); err != nil {
				t.Fatal(err)
			}
			if running != 0 || rows != 1 || done != from {
				t.Fatalf("epochs table: %d done (want %d), %d running, %d rows from %d to %d (want 1)", done, from, running, rows, from, from+1)
			}
			var stale int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM buckets WHERE root_version <> ?`, from+1).Scan(&stale); err != nil || stale != 0 {
				t.Fatalf("%d bucket keys not under root version %d (%v)", stale, from+1, err)
			}
			// A fresh store (no cache) opens every key under the new version.
			fresh, err := keystore.Open(ctx, db, vs, keystore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for sid, want := range keys {
				got, err := fresh.KeyAt(ctx, envelope.Ref{SID: sid, Gen: 1})
				if err != nil || !bytes.Equal(got.Key, want) {
					t.Fatalf("key of %x after the epoch: %v", sid[:4], err)
				}
			}
			root.fired.Restart()
			c.WaitHealthy()
		})
	}
}
