package vaulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// Cluster is an n-node Vault cluster on integrated storage (Raft) on
// 127.0.0.1: one unseal key, every node a voter, Transit mounted at
// transit/. A node can be killed (SIGKILL) and restarted; the others elect
// a new leader as long as a quorum is up.
type Cluster struct {
	t         testing.TB
	Nodes     []*Node
	RootToken string
	unsealKey string
}

// Node is one Vault server of a Cluster.
type Node struct {
	c    *Cluster
	srv  *Server
	ID   string // raft node id: "node-0", "node-1", ...
	Addr string // http://127.0.0.1:PORT, its api_addr
}

// StartCluster starts n Vault servers with Raft storage in temporary
// directories, initialises node 0 (one key share), unseals it, mounts
// Transit, joins the other nodes to it (sys/storage/raft/join), unseals
// them, and waits until every node is a voter. The cluster stops when the
// test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatal("vaulttest: a cluster needs a node")
	}
	c := &Cluster{t: t}
	bin := Binary(t)
	for i := range n {
		port := freePort(t)
		addr := "http://127.0.0.1:" + strconv.Itoa(port)
		srv := &Server{t: t, bin: bin, dir: t.TempDir(), persistent: true, Addr: addr}
		id := "node-" + strconv.Itoa(i)
		// performance_multiplier 1: the tight Raft timings Vault recommends
		// for production hardware (a leader is replaced within seconds),
		// rather than the lenient default of development setups. Autopilot
		// reconciles every second (10 s by default), so that a node that
		// joined is promoted to voter soon.
		cfg := fmt.Sprintf(`storage "raft" {
  path = %q
  node_id = %q
  performance_multiplier = 1
  autopilot_reconcile_interval = "1s"
  autopilot_update_interval = "500ms"
}
listener "tcp" {
  address = "127.0.0.1:%d"
  cluster_address = "127.0.0.1:%d"
  tls_disable = true
}
api_addr = %q
cluster_addr = "https://127.0.0.1:%d"
disable_mlock = true
ui = false
`, filepath.Join(srv.dir, "raft"), id, port, port+1, addr, port+1)
		if err := os.MkdirAll(filepath.Join(srv.dir, "raft"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(srv.dir, "vault.hcl"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, &Node{c: c, srv: srv, ID: id, Addr: addr})
	}
	t.Cleanup(c.Stop)
	for _, nd := range c.Nodes {
		nd.srv.start("server", "-config="+filepath.Join(nd.srv.dir, "vault.hcl"))
	}
	for _, nd := range c.Nodes {
		nd.srv.waitUp()
	}

	first := c.Nodes[0]
	init, err := first.srv.client("").Sys().Init(&vaultapi.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		t.Fatalf("vault init: %v", err)
	}
	c.RootToken, c.unsealKey = init.RootToken, init.KeysB64[0]
	for _, nd := range c.Nodes {
		nd.srv.RootToken, nd.srv.unsealKey = c.RootToken, c.unsealKey
	}
	first.unseal()
	if a := c.Active(); a != first {
		t.Fatalf("vaulttest: %s is active after the init of %s", a.ID, first.ID)
	}
	first.srv.mountTransit()
	// Autopilot adds a joining node as a non-voter and promotes it once it
	// has been healthy for server_stabilization_time (10 s by default).
	if err := first.post("/v1/sys/storage/raft/autopilot/configuration", map[string]any{"server_stabilization_time": "1s"}, nil); err != nil {
		t.Fatalf("vaulttest: autopilot configuration: %v", err)
	}
	for _, nd := range c.Nodes[1:] {
		var joined struct {
			Joined bool `json:"joined"`
		}
		if err := nd.post("/v1/sys/storage/raft/join", map[string]any{"leader_api_addr": first.Addr}, &joined); err != nil || !joined.Joined {
			t.Fatalf("vaulttest: join %s to %s: %v (joined=%v)\n%s", nd.ID, first.ID, err, joined.Joined, nd.Logs())
		}
		nd.unseal()
	}
	c.WaitHealthy()
	return c
}

// Addrs returns the API addresses of every node, in order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		out[i] = nd.Addr
	}
	return out
}

// Client returns a Vault API client on the active node with the root token
// (waiting for one).
func (c *Cluster) Client() *vaultapi.Client { return c.Active().Client() }

// raftServer is one server of sys/storage/raft/configuration.
type raftServer struct {
	NodeID string `json:"node_id"`
	Leader bool   `json:"leader"`
	Voter  bool   `json:"voter"`
}

// WaitHealthy waits until every node runs, a node is active, and the Raft
// configuration holds every node as a voter (Vault's autopilot promotes a
// node that joined once it has been stable for a while).
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	waitFor(c.t, "a healthy cluster (every node running and unsealed, one active, every node a Raft voter)", c.healthy, c.logs)
}

func (c *Cluster) healthy() (bool, string) {
	a := c.active()
	if a == nil {
		return false, "no active node"
	}
	servers, err := a.raftServers()
	if err != nil {
		return false, err.Error()
	}
	voters := 0
	for _, s := range servers {
		if s.Voter {
			voters++
		}
	}
	up := 0
	for _, nd := range c.Nodes {
		if nd.sealedOrDown() == nil {
			up++
		}
	}
	ok := voters == len(c.Nodes) && len(servers) == len(c.Nodes) && up == len(c.Nodes)
	return ok, fmt.Sprintf("%d of %d servers are voters, %d nodes up and unsealed: %+v", voters, len(c.Nodes), up, servers)
}

// raftServers returns the servers of the node's
// sys/storage/raft/configuration.
func (n *Node) raftServers() ([]raftServer, error) {
	var conf struct {
		Data struct {
			Config struct {
				Servers []raftServer `json:"servers"`
			} `json:"config"`
		} `json:"data"`
	}
	if err := n.get("/v1/sys/storage/raft/configuration", &conf); err != nil {
		return nil, err
	}
	return conf.Data.Config.Servers, nil
}

// Active waits for an active node (the Raft leader that serves requests)
// and returns it.
func (c *Cluster) Active() *Node {
	c.t.Helper()
	var a *Node
	waitFor(c.t, "an active node (a running node whose sys/health answers 200)", func() (bool, string) {
		a = c.active()
		return a != nil, "no node answers as active"
	}, c.logs)
	return a
}

// ActiveNow returns the node that answers as active at this moment, or nil
// while there is none (an election is under way).
func (c *Cluster) ActiveNow() *Node { return c.active() }

func (c *Cluster) active() *Node {
	for _, nd := range c.Nodes {
		if nd.Running() && nd.health() == http.StatusOK {
			return nd
		}
	}
	return nil
}

// Standbys returns the running nodes that are not the active one.
func (c *Cluster) Standbys() []*Node {
	a := c.Active()
	var out []*Node
	for _, nd := range c.Nodes {
		if nd != a && nd.Running() {
			out = append(out, nd)
		}
	}
	return out
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, nd := range c.Nodes {
		nd.srv.Stop()
	}
}

func (c *Cluster) logs() string {
	var b strings.Builder
	for _, nd := range c.Nodes {
		l := nd.Logs()
		if ls := strings.Split(l, "\n"); len(ls) > 40 {
			l = strings.Join(ls[len(ls)-40:], "\n")
		}
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", nd.ID, nd.Addr, l)
	}
	return b.String()
}

// Logs returns what every node printed so far (the last lines of each).
func (c *Cluster) Logs() string { return c.logs() }

// Client returns a Vault API client on this node with the root token. A
// standby forwards requests to the active node.
func (n *Node) Client() *vaultapi.Client { return n.srv.client(n.c.RootToken) }

// Logs returns what the node printed so far.
func (n *Node) Logs() string { return n.srv.Logs() }

// Running reports whether the node's process runs (it was not killed or
// stopped).
func (n *Node) Running() bool {
	n.srv.mu.Lock()
	defer n.srv.mu.Unlock()
	return n.srv.cmd != nil
}

// Kill kills the node with SIGKILL: no step-down, no flush; its Raft
// storage stays on disk for Restart.
func (n *Node) Kill() {
	n.srv.mu.Lock()
	cmd := n.srv.cmd
	n.srv.cmd = nil
	n.srv.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// Stop stops the node gracefully (SIGTERM): an active node steps down.
func (n *Node) Stop() { n.srv.Stop() }

// Restart starts a killed or stopped node again on the same addresses and
// storage and unseals it: it rejoins the cluster from its Raft data. When
// the running nodes then hold a quorum, Restart returns once the node has
// rejoined (waitRejoined); without one there is nothing to rejoin yet.
func (n *Node) Restart() {
	n.c.t.Helper()
	n.srv.Stop()
	n.srv.start(n.srv.args...)
	n.srv.waitUp()
	n.unseal()
	n.waitRejoined()
}

// waitRejoined waits, when the running nodes hold a quorum, until the node
// has rejoined the cluster: the active node's Raft configuration lists it
// and the node's own sys/leader names the active node. Under load a
// restarted node's peers may refuse it for a minute or more; this waits on
// that state, not on a time.
func (n *Node) waitRejoined() {
	n.c.t.Helper()
	running := 0
	for _, nd := range n.c.Nodes {
		if nd.Running() {
			running++
		}
	}
	if 2*running <= len(n.c.Nodes) {
		return
	}
	what := n.ID + " to rejoin the cluster after its restart (listed in the active node's Raft configuration, its sys/leader naming the active node)"
	waitFor(n.c.t, what, n.rejoined, n.c.logs)
}

func (n *Node) rejoined() (bool, string) {
	a := n.c.active()
	if a == nil {
		return false, "no active node"
	}
	servers, err := a.raftServers()
	if err != nil {
		return false, err.Error()
	}
	if !slices.ContainsFunc(servers, func(s raftServer) bool { return s.NodeID == n.ID }) {
		return false, fmt.Sprintf("the Raft configuration of %s lacks %s: %+v", a.ID, n.ID, servers)
	}
	var l struct {
		LeaderAddress string `json:"leader_address"`
	}
	if err := n.get("/v1/sys/leader", &l); err != nil {
		return false, err.Error()
	}
	return l.LeaderAddress == a.Addr, fmt.Sprintf("the sys/leader of %s names %q, the active node is %s (%s)", n.ID, l.LeaderAddress, a.ID, a.Addr)
}

// unseal unseals the node and waits until it serves as active or standby.
func (n *Node) unseal() {
	t := n.c.t
	t.Helper()
	st, err := n.srv.client("").Sys().Unseal(n.c.unsealKey)
	if err != nil || st == nil {
		t.Fatalf("vaulttest: unseal %s: %v\n%s", n.ID, err, n.Logs())
	}
	waitFor(t, n.ID+" to serve unsealed, as active or standby (sys/health 200 or 429)", func() (bool, string) {
		err := n.sealedOrDown()
		return err == nil, fmt.Sprint(err)
	}, n.Logs)
}

// health returns the status of GET /v1/sys/health: 200 active, 429
// standby, 503 sealed, 501 not initialised; 0 when unreachable.
func (n *Node) health() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Addr+"/v1/sys/health", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sealedOrDown returns nil when the node runs unsealed, as active or
// standby.
func (n *Node) sealedOrDown() error {
	if !n.Running() {
		return fmt.Errorf("%s is not running", n.ID)
	}
	switch h := n.health(); h {
	case http.StatusOK, http.StatusTooManyRequests:
		return nil
	default:
		return fmt.Errorf("%s: health %d", n.ID, h)
	}
}

func (n *Node) get(path string, out any) error { return n.do(http.MethodGet, path, nil, out) }

func (n *Node) post(path string, in, out any) error { return n.do(http.MethodPost, path, in, out) }

func (n *Node) do(method, path string, in, out any) error {
	// A bound on a hung request only: a join or a configuration read may
	// take long on a loaded machine, and the waits above poll again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var body *strings.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = strings.NewReader(string(b))
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, n.Addr+path, body)
	if err != nil {
		return err
	}
	if n.c.RootToken != "" {
		req.Header.Set("X-Vault-Token", n.c.RootToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Errors []string `json:"errors"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s %s on %s: %d %s", method, path, n.ID, resp.StatusCode, strings.Join(e.Errors, "; "))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
