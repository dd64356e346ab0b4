package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd/testkit/pgtest"
)

// TestClusterBarrierRace races the barrier across three nodes on one
// PostgreSQL and one Vault, now that registrations and decrypt leases of
// different nodes commit beside each other (storage.TxOptions): in each
// round, workers on nodes a and b encrypt under a fresh subject (alone and
// with a bystander, so lineages span shards) and decrypt a record of it,
// while node c forgets it. Whatever the interleaving:
//
//   - every registration acknowledged (200) is in the database and
//     registered before the forget's barrier, and no artifact of the
//     subject's lineage at all lies after it (none was written after the
//     forget's commit, acknowledged or not);
//   - every request sent after the forget's 202 is refused with 410: no
//     plaintext and no registration after the answer.
func TestClusterBarrierRace(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := newVault(t)
	const mount, key = "transit", "shredd-locks"
	opts := vaultOpts(v, mount, key, "--store", dsn, "--cache-ttl", "2s", "--lease-ttl", "3s")
	a := clusterNode(t, "", opts)
	b := clusterNode(t, a.dataDir, opts)
	c := clusterNode(t, a.dataDir, opts)
	a.putKinds(t, "episodic")
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	const rounds, workersPerNode = 12, 3
	var accepted, refused, opened atomic.Int64
	for round := range rounds {
		subject := fmt.Sprintf("race-%d@example.com", round)
		first := a.seal(t, sealReq{Subject: subject, Kind: "episodic"}, "round plaintext", "ctx")
		var (
			mu        sync.Mutex
			acked     []string // artifacts of 200 encrypts
			sentAfter []string // problems: answers to requests sent after the 202
			afterAck  atomic.Bool
			stop      atomic.Bool
			started   sync.WaitGroup
			wg        sync.WaitGroup
		)
		started.Add(2 * workersPerNode)
		for _, n := range []*server{a, b} {
			for w := range workersPerNode {
				wg.Go(func() {
					once := sync.OnceFunc(started.Done)
					defer once()
					for i := 0; !stop.Load(); i++ {
						sentLate := afterAck.Load()
						var r reply
						var err error
						if (i+w)%2 == 0 {
							// Fresh data, in the write unit: the workers'
							// decrypts (the check unit) are no reads it derives from.
							req := sealReq{Subject: subject, Kind: "episodic", Plaintext: b64("p"), Context: b64("c"), Unit: writeUnit}
							if i%3 == 0 {
								req = sealReq{Subjects: []string{subject, fmt.Sprintf("bystander-%d-%d@example.com", round, i%7)}, Kind: "episodic", Plaintext: b64("p"), Context: b64("c"), Unit: writeUnit}
							}
							r, err = n.call(http.MethodPost, "/v1/encrypt", req)
						} else {
							r, err = n.call(http.MethodPost, "/v1/decrypt", decryptReq(first))
						}
						if err != nil {
							mu.Lock()
							sentAfter = append(sentAfter, fmt.Sprintf("%s: transport error %v", n.name, err))
							mu.Unlock()
							return
						}
						switch r.Status {
						case http.StatusOK:
							var out struct {
								Artifact  string `json:"artifact"`
								Plaintext string `json:"plaintext"`
							}
							mu.Lock()
							if err := json.Unmarshal(r.Body, &out); err != nil {
								sentAfter = append(sentAfter, fmt.Sprintf("%s: body %q: %v", n.name, r.Body, err))
							}
							if out.Plaintext != "" {
								opened.Add(1)
								if pt, _ := base64.StdEncoding.DecodeString(out.Plaintext); string(pt) != first.plaintext {
									sentAfter = append(sentAfter, fmt.Sprintf("%s: decrypt gave %q", n.name, pt))
								}
							} else {
								accepted.Add(1)
								acked = append(acked, out.Artifact)
							}
							if sentLate {
								sentAfter = append(sentAfter, fmt.Sprintf("%s: 200 to a request sent after the forget's 202: %s", n.name, r.Body))
							}
							mu.Unlock()
						case http.StatusGone:
							refused.Add(1)
							if sentLate {
								once() // refused after the answer: enough of this worker
								return
							}
						default:
							mu.Lock()
							sentAfter = append(sentAfter, fmt.Sprintf("%s: status %d: %s", n.name, r.Status, r.Body))
							mu.Unlock()
							return
						}
						if i == 3 {
							once() // warmed up: the forget may go
						}
					}
				})
			}
		}
		started.Wait()
		f := c.forget(t, subject)
		afterAck.Store(true)
		// Each worker stops at its first 410 after the 202; a bound in
		// case one never sees it.
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			stop.Store(true)
			<-done
			t.Fatalf("round %d: workers still served the subject 60 s after the forget's 202", round)
		}
		for _, p := range sentAfter {
			t.Errorf("round %d: %s", round, p)
		}
		fv := c.getForget(t, f.Forget)
		if fv.State == "requested" || fv.Barrier <= 0 {
			t.Fatalf("round %d: forget read back %+v", round, fv)
		}
		checkBarrier(t, db, round, first.artifact, acked, fv.Barrier)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d rounds: %d registrations acknowledged before the barrier, %d decrypts served before it, %d requests refused (410)",
		rounds, accepted.Load(), opened.Load(), refused.Load())
	if accepted.Load() == 0 || opened.Load() == 0 || refused.Load() == 0 {
		t.Fatal("the race never raced: no registration, decrypt or refusal")
	}
	for _, n := range []*server{a, b, c} {
		n.checkNoRace()
	}
}

// checkBarrier reads back from the database that every acknowledged
// registration is there and before the forget's barrier, and that no
// artifact of the forgotten subject's lineage (found through first, a
// record of the subject alone) was registered after it.
func checkBarrier(t *testing.T, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, round int, first string, acked []string, barrier int64) {
	t.Helper()
	ctx := context.Background()
	for _, id := range acked {
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatalf("round %d: artifact id %q: %v", round, id, err)
		}
		var seq int64
		if err := db.QueryRowContext(ctx, `SELECT seq FROM artifacts WHERE id = $1`, raw).Scan(&seq); err != nil {
			t.Fatalf("round %d: acknowledged artifact %s not in the database: %v", round, id, err)
		}
		if seq > barrier {
			t.Errorf("round %d: acknowledged artifact %s registered at %d, after the forget's barrier %d", round, id, seq, barrier)
		}
	}
	raw, _ := hex.DecodeString(first)
	ids := "{" + strings.Join(acked, ",") + "}"
	var after, withAcked int
	// The lineage rows, staged or settled while registrations committed
	// beside the settling: each acknowledged artifact keeps its row.
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE a.seq > $2),
		count(*) FILTER (WHERE encode(a.id, 'hex') = ANY($3::text[]))
		FROM lineage_all l JOIN artifacts a ON a.id = l.artifact
		WHERE l.sid = (SELECT sid FROM lineage_all WHERE artifact = $1)`, raw, barrier, ids).Scan(&after, &withAcked); err != nil {
		t.Fatal(err)
	}
	if withAcked != len(acked) {
		t.Errorf("round %d: %d of the %d acknowledged artifacts have the subject in their lineage", round, withAcked, len(acked))
	}
	if after != 0 {
		t.Errorf("round %d: %d artifacts of the forgotten subject registered after its barrier %d", round, after, barrier)
	}
}
