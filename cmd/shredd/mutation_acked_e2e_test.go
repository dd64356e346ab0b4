package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/registry"
)

// TestMutationsNothingVanishes grows the mutation test by the classes of
// issue 44: the registration WAL lost, emptied, swapped with another
// instance's, rolled back to an earlier copy; another instance's root
// file; a root file from before the epoch; a database put back by hand
// from an older backup; each alone and with shredd restore of that backup
// after it; and a second writer once the lock's file is gone. One
// invariant on each: a refused start or restore changes no byte; a served
// data directory never decrypts the forgotten subject, still knows the
// acknowledged registration (or refused to start), keeps the acknowledged
// forget, and lets no forget reach erased while that registration is
// unaccounted for.
func TestMutationsNothingVanishes(t *testing.T) {
	t.Parallel()
	fast := serverOpts{Args: []string{"--cache-ttl", "1s"}}
	base := t.TempDir()
	s, alice := startAlice(t, base, fast, "episodic", "embedding")
	dave := s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave's record", "d")
	fa := s.forget(t, "alice")
	s.runEpoch(t)
	s.waitForget(t, fa.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	backup := backupTo(t, base, "b.db")
	s.stop()
	before := copyDir(t, base) // the WAL as it was before the registration below
	s = startServer(t, base, fast)
	held := s.heldArtifact(t, "dave", "ann") // acknowledged after the backup
	s.stop()
	other := t.TempDir()
	o := startServer(t, other, serverOpts{})
	o.putKinds(t, "episodic")
	o.seal(t, sealReq{Subject: "x", Kind: "episodic"}, "x", "x")
	o.stop()

	walLost := func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, registry.WALDir)) }
	walEmptied := func(t *testing.T, dir string) {
		segs, _ := filepath.Glob(filepath.Join(dir, registry.WALDir, "*.seg"))
		for _, p := range segs {
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldDB := func(t *testing.T, dir string) { putDB(t, dir, readFile(t, backup)) }
	type mutation struct {
		name    string
		do      func(t *testing.T, dir string)
		restore bool // shredd restore of the backup after the mutation
	}
	var muts []mutation
	for _, m := range []mutation{
		{name: "WAL lost", do: walLost},
		{name: "WAL emptied", do: walEmptied},
		{name: "WAL swapped with another instance's", do: copyIn(other, registry.WALDir)},
		{name: "WAL rolled back", do: copyIn(before, registry.WALDir)},
		{name: "nothing"},
	} {
		if m.do == nil {
			m.do = func(*testing.T, string) {}
		}
		muts = append(muts, m,
			mutation{name: m.name + ", then restore", do: m.do, restore: true},
			mutation{name: m.name + ", older database by hand", do: allOf(m.do, oldDB)})
	}
	muts = append(muts,
		mutation{name: "another instance's root.key", do: copyIn(other, node.RootFile)},
		mutation{name: "root.key from before the epoch", do: copyIn(before, node.RootFile)},
		mutation{name: "root.key from before the epoch, then restore", do: copyIn(before, node.RootFile), restore: true},
		mutation{name: "another instance's root.key and WAL", do: copyIn(other, node.RootFile, registry.WALDir)},
	)

	served, refused := 0, 0
	for _, m := range muts {
		t.Run(m.name, func(t *testing.T) {
			dir := copyDir(t, base)
			m.do(t, dir)
			if m.restore {
				was := dirState(t, dir)
				if r := cli(t, "", nil, nil, "restore", "--data-dir", dir, backup); r.code != 0 {
					if now := dirState(t, dir); now != was {
						t.Fatalf("a refused restore changed the data directory:\n%s\n%s\nbefore:\n%s\nafter:\n%s", r.stdout, r.stderr, was, now)
					}
				}
			}
			was := dirState(t, dir)
			srv := startProcess(t, dir, fast)
			if !srv.waitListening() {
				refused++
				if now := dirState(t, dir); now != was {
					t.Fatalf("a refused start changed the data directory:\n%s\nbefore:\n%s\nafter:\n%s", srv.logs.String(), was, now)
				}
				if !strings.Contains(srv.logs.String(), ":") {
					t.Fatalf("a refused start said nothing: %q", srv.logs.String())
				}
				return
			}
			served++
			defer srv.stop()
			staysForgotten(t, srv, alice, m.name)
			if r := mustDo(t, srv, "GET", "/v1/forgets/"+fa.Forget, nil); r.Status != http.StatusOK {
				t.Fatalf("the acknowledged forget of alice is gone: %d %s", r.Status, r.Body)
			}
			if r := mustDo(t, srv, "GET", "/v1/artifacts/"+held, nil); r.Status != http.StatusOK {
				t.Fatalf("the acknowledged registration %s vanished without a refused start: %d %s", held, r.Status, r.Body)
			}
			// dave's forget: the plaintext-held artifact keeps it short of
			// erased (ann never acks); erased would be a false claim.
			r := mustDo(t, srv, "POST", "/v1/forget", map[string]any{"subject": "dave"})
			if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
				return
			}
			var f forgetView
			r.into(t, &f)
			deadline := time.Now().Add(4 * time.Second)
			for time.Now().Before(deadline) && f.State != "erased" {
				mustDo(t, srv, "POST", "/v1/epoch", nil)
				if v := mustDo(t, srv, "POST", "/v1/forgets/"+f.Forget+"/verify", nil); v.Status == http.StatusOK {
					v.into(t, &f)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if f.State == "erased" {
				t.Fatalf("dave's forget reached erased while ann holds dave's plaintext-held artifact %s and never acked", held)
			}
			if d := mustDo(t, srv, "POST", "/v1/decrypt", decryptReq(dave)); d.Status == http.StatusOK && f.condition("key_destroyed").Status == "ok" {
				t.Fatalf("dave's key is destroyed while his record decrypts")
			}
		})
	}
	t.Logf("%d mutations: %d served, %d refused", len(muts), served, refused)
	if served == 0 || refused == 0 {
		t.Fatalf("every mutation was %s: the test checks one side only", map[bool]string{true: "refused", false: "served"}[served == 0])
	}
}
