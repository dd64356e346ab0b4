package vaulttest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// transitEncrypt sends one Transit encrypt to node n without following
// redirects and returns the status and, on a redirect, its location.
func transitEncrypt(t *testing.T, n *Node) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.Addr+"/v1/transit/encrypt/k", strings.NewReader(`{"plaintext":"aGVsbG8="}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", n.c.RootToken)
	cl := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, resp.Header.Get("Location") + " " + string(b)
}

// TestCluster checks the harness and the Vault behaviour the root store
// relies on: a standby serves Transit by forwarding to the active node (no
// performance standbys in Vault OSS); SIGKILL of the active node elects
// another one with the data; without a quorum no node serves; a killed
// node restarts and rejoins.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	a := c.Active()
	if _, err := a.Client().Logical().Write("transit/keys/k", nil); err != nil {
		t.Fatal(err)
	}
	sb := c.Standbys()
	if len(sb) != 2 {
		t.Fatalf("%d standbys, want 2", len(sb))
	}
	for _, n := range sb {
		waitEncrypt(t, n, "standby "+n.ID+" to serve a Transit encrypt (200, forwarded to the active node)")
	}

	a.Kill()
	b := c.Active()
	if b == a {
		t.Fatalf("the killed node %s is still active", a.ID)
	}
	if sec, err := b.Client().Logical().Read("transit/keys/k"); err != nil || sec == nil {
		t.Fatalf("transit key on the new active node %s: %v", b.ID, err)
	}

	// Kill the new active node too: one node of three has no quorum, and
	// it serves nothing (it redirects to a dead leader, or answers 5xx).
	b.Kill()
	var last *Node
	for _, n := range c.Nodes {
		if n.Running() {
			last = n
		}
	}
	for range 5 {
		if st, loc := transitEncrypt(t, last); st/100 == 2 {
			t.Fatalf("encrypt on %s without a quorum: %d %s", last.ID, st, loc)
		}
		if c.ActiveNow() != nil {
			t.Fatalf("an active node without a quorum")
		}
		time.Sleep(200 * time.Millisecond)
	}

	a.Restart()
	if got := c.Active(); got != a && got != last {
		t.Fatalf("active node %s after the restart of %s", got.ID, a.ID)
	}
	b.Restart()
	c.WaitHealthy()
	// A standby answers 500 "active cluster node not found" until it has
	// learned the new active node (it checks every few seconds).
	for _, n := range c.Nodes {
		waitEncrypt(t, n, n.ID+" to serve a Transit encrypt (200) after the restarts")
	}
}

// waitEncrypt waits until node n answers a Transit encrypt with 200.
func waitEncrypt(t *testing.T, n *Node, what string) {
	t.Helper()
	waitFor(t, what, func() (bool, string) {
		st, loc := transitEncrypt(t, n)
		return st == http.StatusOK, fmt.Sprintf("%d %s", st, loc)
	}, n.c.logs)
}
