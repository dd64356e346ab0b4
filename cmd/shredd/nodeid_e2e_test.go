package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/testkit/pgtest"
)

// nodeID returns the id s logged in its "node recorded" line (its row in
// table nodes), failing t when there is none.
func nodeID(t *testing.T, s *server) string {
	t.Helper()
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Node string `json:"node"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "node recorded" && l.Node != "" {
			return l.Node
		}
	}
	t.Fatalf("%s logged no \"node recorded\" line:\n%s", s.name, tail(s.logs.String(), 40))
	return ""
}

// nodeIDForm is the form of a node id: random per start.
var nodeIDForm = regexp.MustCompile(`^[0-9a-f]{16}-[0-9a-f]{8}$`)

// TestCopiedDataDir: a data directory copied from a node (stopped, copied,
// then both started) on one PostgreSQL database and one Vault root is
// just another node. Both start and serve under distinct rows of table
// nodes, a forget through either is refused through the other, and each
// restarts after forgets went through both: nothing in the data
// directory names the node, and no per-directory ledger head in Vault can
// make the two fight (the forget records are what a start reconciles
// from). A fresh node writes no node.id file.
func TestCopiedDataDir(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := newVault(t)
	opts := vaultOpts(v, "transit", "shredd-copied-dir", "--store", dsn, "--cache-ttl", "2s", "--lease-ttl", "3s")
	a := clusterNode(t, "", opts)
	if _, err := os.Stat(filepath.Join(a.dataDir, "node.id")); !os.IsNotExist(err) {
		t.Fatalf("a fresh node's data directory holds node.id (%v)", err)
	}
	a.putKinds(t, "episodic")
	alice := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	bob := a.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob likes coffee", "m2")
	carol := a.seal(t, sealReq{Subject: "carol@example.com", Kind: "episodic"}, "carol likes juice", "m3")
	dave := a.seal(t, sealReq{Subject: "dave@example.com", Kind: "episodic"}, "dave likes water", "m4")
	erin := a.seal(t, sealReq{Subject: "erin@example.com", Kind: "episodic"}, "erin likes milk", "m5")
	frank := a.seal(t, sealReq{Subject: "frank@example.com", Kind: "episodic"}, "frank likes soda", "m6")
	a.forget(t, "dave@example.com") // the ledger and its records hold a line before the copy
	a.stop()

	copied := copyDir(t, a.dataDir)
	a = startServer(t, a.dataDir, opts)
	b := startServer(t, copied, opts)
	db := clusterDB(t, dsn)
	ida, idb := nodeID(t, a), nodeID(t, b)
	if ida == idb || !nodeIDForm.MatchString(ida) || !nodeIDForm.MatchString(idb) {
		t.Fatalf("node ids of the original and the copy: %q, %q", ida, idb)
	}
	for _, id := range []string{ida, idb} {
		if n := count(t, db, `SELECT count(*) FROM nodes WHERE id = ?`, id); n != 1 {
			t.Fatalf("%d rows of node %s in table nodes", n, id)
		}
	}
	for _, s := range []*server{a, b} {
		s.open(t, alice)
		s.open(t, bob)
		s.shredded(t, dave)
	}

	// A forget through each: refused through the other at once.
	a.forget(t, "alice@example.com")
	b.forget(t, "bob@example.com")
	for _, s := range []*server{a, b} {
		s.shredded(t, alice)
		s.shredded(t, bob)
		s.open(t, carol)
	}

	// Each restarts after forgets went through both, the other having
	// forgotten more meanwhile: before, the two shared one ledger head
	// slot in Vault, so the copy found the original's head and took its
	// own authentic ledger for a damaged one.
	b.stop()
	a.forget(t, "erin@example.com")
	time.Sleep(2 * time.Second) // the background work would have kept the head by now
	b = startServer(t, copied, opts)
	b.forget(t, "frank@example.com")
	a.stop()
	time.Sleep(2 * time.Second)
	a = startServer(t, a.dataDir, opts)
	for _, s := range []*server{a, b} {
		if l := s.logs.String(); strings.Contains(l, "forget ledger was not whole") || strings.Contains(l, "level\":\"ERROR") {
			t.Fatalf("%s restarted with a ledger taken for damaged:\n%s", s.name, tail(notableLogs(l), 40))
		}
		for _, rec := range []record{alice, bob, dave, erin, frank} {
			s.shredded(t, rec)
		}
		s.open(t, carol)
	}
	if nodeID(t, a) == ida || nodeID(t, b) == idb {
		t.Fatalf("a restart kept its node id: %s %s", nodeID(t, a), nodeID(t, b))
	}
	// shredd ledger check with the Vault root: no head is kept, the
	// forget records are; the ledger is whole.
	b.stop()
	args := append([]string{"ledger", "check", "--data-dir", copied}, opts.Args...)
	if r := cli(t, "", opts.Env, nil, args...).want(t, 0); !strings.Contains(string(r.stdout), "head kept with the root: none (the root store keeps the forget records instead") {
		t.Fatalf("shredd ledger check with the Vault root:\n%s", r.stdout)
	}
	for _, dir := range []string{a.dataDir, copied} {
		if _, err := os.Stat(filepath.Join(dir, "node.id")); !os.IsNotExist(err) {
			t.Fatalf("%s holds node.id (%v)", dir, err)
		}
	}
}
