package main

import (
	"crypto/rand"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// plantSQL runs statements on a stopped data directory's database.
func plantSQL(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, node.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// staysForgotten fails t when srv, started after the mutation named
// mutation, opens alice's record or seals anew for alice (an episodic
// record), her subject forgotten before the mutation.
func staysForgotten(t *testing.T, srv *server, alice record, mutation string) {
	t.Helper()
	for _, r := range []reply{
		mustDo(t, srv, "POST", "/v1/decrypt", decryptReq(alice)),
		mustDo(t, srv, "POST", "/v1/encrypt", map[string]any{"subject": "alice", "kind": "episodic", "plaintext": b64("again")}),
	} {
		if r.Status == http.StatusOK {
			t.Fatalf("%s: the forgotten subject answered 200 after the mutation", mutation)
		}
	}
}

// TestMutationsNeverClaim mutates a data directory in many ways (missing
// and swapped secrets, another instance's secrets, extra schema objects
// that skip updates, flipped bits in every page of the database) and
// checks one invariant on each: a forgotten subject never decrypts or
// encrypts again, and no forget reaches erased while its subject's data
// still opens. A refused start or a stalled forget is fine; a false claim
// is not.
func TestMutationsNeverClaim(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	fast := serverOpts{Args: []string{"--cache-ttl", "1s"}}
	s, alice := startAlice(t, base, fast, "episodic")
	dave := s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave's record", "d")
	s.forget(t, "alice")
	s.runEpoch(t)
	s.stop()
	other := t.TempDir()
	startServer(t, other, serverOpts{}).stop()

	type mutation struct {
		name string
		do   func(t *testing.T, dir string)
	}
	swapFrom := func(names ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(other, n))
				if err != nil {
					t.Fatal(err)
				}
				fi, _ := os.Stat(filepath.Join(other, n))
				os.Remove(filepath.Join(dir, n))
				if err := os.WriteFile(filepath.Join(dir, n), b, fi.Mode().Perm()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	remove := func(names ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for _, n := range names {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
	muts := []mutation{
		{"no subject.key", remove(node.SecretFile)},
		{"random subject.key", func(t *testing.T, dir string) {
			b := make([]byte, 32)
			rand.Read(b)
			os.WriteFile(filepath.Join(dir, node.SecretFile), b, 0o600)
		}},
		{"no attestation key pair", remove(node.AttestationKeyFile, node.AttestationPubFile)},
		{"no log key pair", remove(node.LogKeyFile, node.LogVKeyFile)},
		{"another instance's subject.key", swapFrom(node.SecretFile)},
		{"another instance's secrets", swapFrom(node.SecretFile, node.AttestationKeyFile, node.AttestationPubFile, node.LogKeyFile, node.LogVKeyFile)},
		{"another instance's database", swapFrom(node.DBFile)},
		{"trigger keeps subject keys", func(t *testing.T, dir string) {
			plantSQL(t, dir, `CREATE TRIGGER keep BEFORE UPDATE OF wrapped ON subjects BEGIN SELECT RAISE(IGNORE); END`)
		}},
		{"trigger keeps bucket keys", func(t *testing.T, dir string) {
			plantSQL(t, dir, `CREATE TRIGGER keepb BEFORE UPDATE OF wrapped ON buckets BEGIN SELECT RAISE(IGNORE); END`)
		}},
		{"trigger keeps forget states", func(t *testing.T, dir string) {
			plantSQL(t, dir, `CREATE TRIGGER keepf BEFORE UPDATE OF state ON forgets BEGIN SELECT RAISE(IGNORE); END`)
		}},
		{"trigger deletes tombstones", func(t *testing.T, dir string) {
			plantSQL(t, dir, `CREATE TRIGGER tomb AFTER UPDATE ON subjects WHEN NEW.state != OLD.state BEGIN DELETE FROM subjects WHERE sid = NEW.sid; END`)
		}},
	}
	fi, err := os.Stat(filepath.Join(base, node.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// Every page of the database, sampled to at most 24 (each served case
	// costs a start, a forget, an epoch and a verification).
	const page = 4096
	pages := int(fi.Size() / page)
	step := max(1, pages/24)
	for p := 0; p < pages; p += step {
		off := int64(p)*page + page/2
		muts = append(muts, mutation{"flipped bits in page " + strconv.Itoa(p+1), func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, node.DBFile), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 16)
			f.ReadAt(b, off)
			for i := range b {
				b[i] ^= 0x5a
			}
			f.WriteAt(b, off)
		}})
	}

	served, erased := 0, 0
	for _, m := range muts {
		t.Run(m.name, func(t *testing.T) {
			dir := copyDir(t, base)
			m.do(t, dir)
			srv := startProcess(t, dir, fast)
			if !srv.waitListening() {
				return // refused: no claim made
			}
			served++
			defer srv.stop()
			// alice was forgotten before the mutation: never opens again.
			staysForgotten(t, srv, alice, m.name)
			// A forget of dave reaches erased only if dave's data is
			// really gone.
			r := mustDo(t, srv, "POST", "/v1/forget", map[string]any{"subject": "dave"})
			if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
				return // refused: no claim
			}
			var f forgetView
			r.into(t, &f)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				// An epoch each round: the one after the bucket re-key
				// shreds the forget.
				mustDo(t, srv, "POST", "/v1/epoch", nil)
				v := mustDo(t, srv, "POST", "/v1/forgets/"+f.Forget+"/verify", nil)
				if v.Status == http.StatusOK {
					v.into(t, &f)
				}
				if f.State == "erased" {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if f.State == "erased" {
				erased++
			}
			if f.State == "erased" || f.State == "shredded" || f.condition("key_destroyed").Status == "ok" {
				if d := mustDo(t, srv, "POST", "/v1/decrypt", decryptReq(dave)); d.Status == http.StatusOK {
					t.Fatalf("%s: the forget of dave is %s (key_destroyed %s) while dave's record still decrypts", m.name, f.State, f.condition("key_destroyed").Status)
				}
			}
		})
	}
	t.Logf("%d mutations: %d served (each checked: %d forgets erased), %d refused", len(muts), served, erased, len(muts)-served)
	if served > 0 && erased == 0 {
		t.Fatal("no served mutation let a forget reach erased: the check of erased claims never ran")
	}
}

func mustDo(t *testing.T, s *server, method, path string, body any) reply {
	t.Helper()
	r, err := s.call(method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}
