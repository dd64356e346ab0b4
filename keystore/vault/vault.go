// Package vault is the production root store of shredd: the root of the key
// tree is one HashiCorp Vault Transit key, so the root key never leaves Vault
// and destroying old versions happens inside Vault (rotate, raise
// min_decryption_version, trim). It implements keystore.RootStore.
//
// Bucket keys are wrapped and unwrapped with Transit encrypt, decrypt and
// rewrap, in batches (batch_input). The key name is configuration and never
// encodes anything about subjects.
package vault

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
)

var _ keystore.RootStore = (*Root)(nil)

// Config names the Vault server, credentials and Transit key.
type Config struct {
	// Address is VAULT_ADDR: one address, or the comma-separated
	// addresses of the nodes of one Vault cluster (integrated storage,
	// Raft). Requests go to one node (a standby forwards them to the active
	// node) and move on to the next when that node cannot be reached, is
	// sealed or has no active node to forward to.
	Address   string
	Token     string // VAULT_TOKEN; empty with AppRole
	Namespace string // VAULT_NAMESPACE (Vault Enterprise)
	CACert    string // PEM file of the CA that signed Vault's TLS certificate
	Mount     string // Transit mount path, default "transit"
	Key       string // Transit key name, default "shredd-root"
	// HeadMount is the path of a KV version 2 mount where shredd keeps
	// what belongs beside the Transit key (the marks of durable streams,
	// the shared secrets, the forget records, the key's owner), default
	// "secret": Transit keys carry no metadata of their own. The secrets
	// are named shredd/<Key>/....
	HeadMount string

	// AppRole login, used when RoleID is set: role and secret id, and the
	// auth mount (default "approle").
	RoleID, SecretID, AppRoleMount string

	// Timeout bounds one request to Vault (default 10 s).
	Timeout time.Duration
}

// KeyConfig is the Transit key's configuration as read at start-up, recorded
// for the attestation.
type KeyConfig struct {
	Name                 string `json:"name"`
	Type                 string `json:"type"`
	Exportable           bool   `json:"exportable"`
	AllowPlaintextBackup bool   `json:"allow_plaintext_backup"`
	DeletionAllowed      bool   `json:"deletion_allowed"`
	LatestVersion        int    `json:"latest_version"`
	MinDecryptionVersion int    `json:"min_decryption_version"`
	MinEncryptionVersion int    `json:"min_encryption_version"`
	MinAvailableVersion  int    `json:"min_available_version"`
}

// ErrUnsafeKey means the Transit key's configuration would defeat shredding
// (exportable or allow_plaintext_backup): a copy of the root could then exist
// outside Vault, and trimming versions would prove nothing.
var ErrUnsafeKey = errors.New("vault transit key config defeats shredding")

// Root is a root store on one Vault Transit key.
type Root struct {
	nodes   []node       // one per address of Config.Address, same token
	cur     atomic.Int64 // the node tried first
	mount   string
	key     string
	kv      string // HeadMount
	timeout time.Duration

	conf  Config
	mu    sync.Mutex
	ready bool
	// A refused AppRole login is not tried again before loginCooldown:
	// every call of a store that is not ready logs in, and Vault locks an
	// AppRole out after a few failed logins (good credentials then fail
	// too).
	loginFailed time.Time
	loginErr    error
	cfg         KeyConfig
	// mayCreate says whether a missing Transit key may be created
	// (SetMayCreate); nil: always.
	mayCreate func(context.Context) (bool, error)
}

// ErrKeyMissing means the Transit key (or its mount) does not exist while
// the data it would open does: this is not the Vault, mount or key the data
// was written with, and no key is created next to it. It wraps
// keystore.ErrNotFound.
var ErrKeyMissing = fmt.Errorf("vault transit key missing next to existing data: %w", keystore.ErrNotFound)

// errForbidden is a 403: the token's policy does not allow the call.
var errForbidden = errors.New("the token's policy does not allow it")

// errNoMount is a 404 of a mount that is not enabled (Transit or KV).
var errNoMount = errors.New("the mount is not enabled")

// SetMayCreate sets what Check asks before it creates a missing Transit
// key: shredd serve answers false when the data directory or the database
// already holds data (a new key would open none of it), so that a fresh
// Vault, another cluster or a missing mount is a refused start instead of
// a new root next to old data. Call it before the first operation.
func (s *Root) SetMayCreate(f func(context.Context) (bool, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mayCreate = f
}

// node is one address of Config.Address: a Vault server, or a node of a
// Vault cluster.
type node struct {
	c *vaultapi.Client // follows a standby's redirect to the active node
	// raw is c without following redirects, for the batch calls (on a
	// redirect the Vault client sends a raw body again as "null", which
	// Vault refuses as a request without input) and rotate (see Rotate).
	raw  *vaultapi.Client
	host string // host:port
}

// New returns a Root for the configured Vault without contacting it; the
// first operation (or Check) logs in and checks the key.
func New(c Config) (*Root, error) {
	s := &Root{conf: c, mount: strings.Trim(c.Mount, "/"), key: c.Key, timeout: c.Timeout}
	addrs := []string{""} // the client's default (VAULT_ADDR, else https://127.0.0.1:8200)
	if c.Address != "" {
		addrs = strings.Split(c.Address, ",")
	}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" && c.Address != "" {
			return nil, fmt.Errorf("vault: empty address in %q: %w", c.Address, shredd.ErrInvalid)
		}
		var n node
		var err error
		if n.c, err = newClient(c, a, false); err != nil {
			return nil, err
		}
		if n.raw, err = newClient(c, a, true); err != nil {
			return nil, err
		}
		u, err := url.Parse(n.c.Address())
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("vault: address %q: %w", a, shredd.ErrInvalid)
		}
		n.host = u.Host
		s.nodes = append(s.nodes, n)
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	if s.mount == "" {
		s.mount = "transit"
	}
	if s.key == "" {
		s.key = "shredd-root"
	}
	if s.kv = strings.Trim(c.HeadMount, "/"); s.kv == "" {
		s.kv = "secret"
	}
	return s, nil
}

// newClient returns a Vault client on addr ("" for the client's default)
// with c's token, namespace and CA; with noRedirects, it does not follow
// redirects. Each client has its own api.Config: a client keeps a pointer
// to the config it was made with.
func newClient(c Config, addr string, noRedirects bool) (*vaultapi.Client, error) {
	vc := vaultapi.DefaultConfig()
	if addr != "" {
		vc.Address = addr
	}
	// Each call gets its own deadline (Root.timeout) around the whole
	// exchange, body included; the client's own timeout would cancel raw
	// responses before their body is read.
	vc.Timeout = 0
	vc.MaxRetries = 0 // retries belong to the epoch's backoff, not to each call
	vc.DisableRedirects = noRedirects
	if c.CACert != "" {
		if err := vc.ConfigureTLS(&vaultapi.TLSConfig{CACert: c.CACert}); err != nil {
			return nil, fmt.Errorf("vault: tls: %w", err)
		}
	}
	client, err := vaultapi.NewClient(vc)
	if err != nil {
		return nil, fmt.Errorf("vault: client: %w", err)
	}
	client.SetToken(c.Token)
	if c.Namespace != "" {
		client.SetNamespace(c.Namespace)
	}
	return client, nil
}

// Open is New followed by Check.
func Open(ctx context.Context, c Config) (*Root, error) {
	s, err := New(c)
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check logs in (AppRole, when configured), creates the Transit key when it
// does not exist (aes256-gcm96, not exportable, no plaintext backup), and
// refuses a key whose configuration would defeat shredding with
// ErrUnsafeKey. Until a Check succeeds, every operation runs it first, so a
// Vault that was down at start-up is picked up once it is back.
func (s *Root) Check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	if s.conf.RoleID != "" {
		if s.loginErr != nil && time.Since(s.loginFailed) < loginCooldown {
			return s.loginErr
		}
		if err := s.appRoleLogin(ctx, s.conf); err != nil {
			s.loginFailed, s.loginErr = time.Now(), err
			return err
		}
		s.loginErr = nil
	}
	_, err := s.readKeyLocked(ctx)
	if errors.Is(err, keystore.ErrNotFound) || errors.Is(err, errNoMount) {
		if s.mayCreate != nil {
			ok, cerr := s.mayCreate(ctx)
			if cerr != nil {
				return fmt.Errorf("vault: before creating the key: %w", cerr)
			}
			if !ok {
				return fmt.Errorf("vault: the Transit key %s/keys/%s does not exist at %s (or its mount %s/ is not there), but the data directory holds data wrapped under it: %w; "+
					"nothing was created. This is not the Vault, mount or key the data was written with: point --vault-addr, --vault-transit-mount and --vault-key at that key (shredd never creates a root key next to existing data)",
					s.mount, s.key, s.addresses(), s.mount, ErrKeyMissing)
			}
		}
		// Nothing is created before the KV mount shredd needs is known to
		// be there and usable.
		if err := s.checkKV(ctx); err != nil {
			return err
		}
		if _, err := s.write(ctx, "keys/"+s.key, map[string]any{"type": "aes256-gcm96", "exportable": false, "allow_plaintext_backup": false}); err != nil {
			return fmt.Errorf("vault: create key: %w", err)
		}
		_, err = s.readKeyLocked(ctx)
	}
	if err != nil {
		return err // ErrUnsafeKey for a key whose config defeats shredding
	}
	s.ready = true
	return nil
}

// loginCooldown is how long a refused AppRole login is answered again
// without asking Vault (Check).
const loginCooldown = 5 * time.Second

func (s *Root) ensure(ctx context.Context) error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready {
		return nil
	}
	return s.Check(ctx)
}

func (s *Root) appRoleLogin(ctx context.Context, c Config) error {
	mount := strings.Trim(c.AppRoleMount, "/")
	if mount == "" {
		mount = "approle"
	}
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().WriteWithContext(ctx, "auth/"+mount+"/login", map[string]any{"role_id": c.RoleID, "secret_id": c.SecretID})
		return err
	})
	if err != nil {
		// A refused login (bad or expired secret id) leaves shredd without
		// Vault: fail closed as unavailable, whatever Vault's status code.
		return fmt.Errorf("vault: approle login: %w: %v", keystore.ErrRootUnavailable, err)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return fmt.Errorf("vault: approle login: no token returned: %w", keystore.ErrRootUnavailable)
	}
	for _, n := range s.nodes {
		n.c.SetToken(sec.Auth.ClientToken)
		n.raw.SetToken(sec.Auth.ClientToken)
	}
	return nil
}

// KeepTokenFresh renews the client token at half its TTL until ctx ends,
// and logs in again with AppRole (when configured) once the token can no
// longer be renewed: not renewable, lookup failing, or a renewal capped by
// the token's max TTL. A token without expiry (root) needs nothing and
// returns at once. Problems go to onErr; the store fails closed meanwhile.
func (s *Root) KeepTokenFresh(ctx context.Context, c Config, onErr func(error)) {
	relogin := func() bool {
		if c.RoleID == "" {
			return false
		}
		s.mu.Lock()
		err := s.appRoleLogin(ctx, c)
		s.mu.Unlock()
		if err != nil {
			onErr(err)
			return false
		}
		return true
	}
	for {
		var sec *vaultapi.Secret
		err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
			sec, err = n.c.Auth().Token().LookupSelfWithContext(ctx)
			return err
		})
		if err != nil {
			onErr(fmt.Errorf("vault: token lookup: %w", classify(err)))
			if !relogin() && !sleep(ctx, 30*time.Second) {
				return
			}
			continue
		}
		if sec == nil || sec.Data == nil || sec.Data["expire_time"] == nil {
			return // root tokens and other tokens without expiry
		}
		ttl, _ := sec.TokenTTL()
		renewable, _ := sec.TokenIsRenewable()
		creation := time.Duration(intOf(sec.Data["creation_ttl"])) * time.Second
		if !sleep(ctx, max(ttl/2, 100*time.Millisecond)) {
			return
		}
		if !renewable {
			if !relogin() {
				onErr(fmt.Errorf("vault: token is not renewable and expires in %v", ttl))
				if !sleep(ctx, max(ttl/2, time.Second)) {
					return
				}
			}
			continue
		}
		var rs *vaultapi.Secret
		err = s.call(ctx, false, func(ctx context.Context, n node) (err error) {
			rs, err = n.c.Auth().Token().RenewSelfWithContext(ctx, 0)
			return err
		})
		switch {
		case err != nil:
			onErr(fmt.Errorf("vault: token renew: %w", classify(err)))
			relogin()
		case rs != nil && rs.Auth != nil && creation > 0 && time.Duration(rs.Auth.LeaseDuration)*time.Second < creation:
			// Vault capped the renewal at the token's max TTL: the token
			// will expire for good, so get a new one while it still works.
			if !relogin() {
				onErr(fmt.Errorf("vault: token renewal capped by its max TTL (%ds left)", rs.Auth.LeaseDuration))
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Kind returns "vault-transit".
func (s *Root) Kind() string { return "vault-transit" }

// Describe returns the Transit key's configuration as last read.
func (s *Root) Describe() keystore.KeyDescription {
	c := s.KeyConfig()
	return keystore.KeyDescription{Name: c.Name, Type: c.Type, Exportable: c.Exportable, AllowPlaintextBackup: c.AllowPlaintextBackup,
		MinAvailableVersion: c.MinAvailableVersion, LatestVersion: c.LatestVersion}
}

// KeyConfig returns the Transit key's configuration as last read.
func (s *Root) KeyConfig() KeyConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// classify maps a Vault client error to the keystore's sentinels. It is the
// one function that reads Vault's error messages; TestErrorMessages pins it
// against a real Vault.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		msg := strings.ToLower(strings.Join(re.Errors, "; "))
		switch {
		case re.StatusCode == http.StatusNotFound && strings.Contains(msg, "no handler for route"):
			// The mount itself is gone (Transit or KV disabled): not a
			// missing key of the client's, a backend shredd cannot use.
			return fmt.Errorf("%w: %w: vault answered 404: %s", keystore.ErrRootUnavailable, errNoMount, msg)
		case re.StatusCode == http.StatusNotFound || strings.Contains(msg, "encryption key not found") ||
			strings.Contains(msg, "could not delete key; not found") || strings.Contains(msg, "no existing key named"):
			return fmt.Errorf("%w: %s", keystore.ErrNotFound, msg)
		case strings.Contains(msg, "too old") || strings.Contains(msg, "disallowed by policy") ||
			strings.Contains(msg, "version is below") || strings.Contains(msg, "has been trimmed") ||
			strings.Contains(msg, "key version") && strings.Contains(msg, "not found"):
			return fmt.Errorf("%w: %s", keystore.ErrVersionDestroyed, msg)
		case strings.Contains(msg, "message authentication failed") || strings.Contains(msg, "invalid ciphertext") ||
			strings.Contains(msg, "invalid version") || strings.Contains(msg, "ciphertext") && re.StatusCode == http.StatusBadRequest:
			return fmt.Errorf("%w: %s", keystore.ErrCorrupt, msg)
		case re.StatusCode == http.StatusBadRequest:
			// Not shredd.ErrInvalid: the request Vault refused is
			// shredd's, not its client's; an internal error.
			return fmt.Errorf("vault: request refused as invalid: %s", msg)
		}
		// 403 permission denied, 503 sealed or standby, 5xx: fail closed.
		if re.StatusCode == http.StatusForbidden {
			return fmt.Errorf("%w: %w: vault answered 403: %s", keystore.ErrRootUnavailable, errForbidden, msg)
		}
		return fmt.Errorf("%w: vault answered %d: %s", keystore.ErrRootUnavailable, re.StatusCode, msg)
	}
	// Connection refused, timeouts, TLS errors.
	return fmt.Errorf("%w: %v", keystore.ErrRootUnavailable, err)
}

func (s *Root) path(p string) string { return s.mount + "/" + p }

// addresses names the Vault nodes, for messages.
func (s *Root) addresses() string {
	var hs []string
	for _, n := range s.nodes {
		hs = append(hs, n.c.Address())
	}
	return strings.Join(hs, ",")
}

// write writes a path of the Transit mount. Every write shredd makes may
// be sent twice (creating an existing key, setting a config, trimming,
// encrypting) except rotate: see Rotate.
func (s *Root) write(ctx context.Context, p string, data map[string]any) (*vaultapi.Secret, error) {
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().WriteWithContext(ctx, s.path(p), data)
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	return sec, nil
}

// call runs f with one node's client, under a deadline of s.timeout. When
// the node could not serve the request, it runs f again on the next node,
// each node at most once: the node could not be reached (connection
// refused), or it is a standby whose active node is gone (it redirects to
// an address that refuses connections, or answers 5xx), or it is sealed
// (503). Every request but rotate may take effect twice. With once
// (rotate), only a refused connection to the node itself moves on within
// the call: a standby may have forwarded the request to an active node that
// acted on it and died before answering (Vault then falls back to a
// redirect, which rotate does not follow either). The epoch reads the
// key's versions before it rotates again, so such a rotation is reused,
// never repeated. A node that failed is tried last by the next calls.
func (s *Root) call(ctx context.Context, once bool, f func(context.Context, node) error) error {
	start := int(s.cur.Load())
	var err error
	for i := range len(s.nodes) {
		n := (start + i) % len(s.nodes)
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		err = f(cctx, s.nodes[n])
		cancel()
		if err == nil || !s.failedOver(n, err, once) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// failedOver reports whether a request that failed on node n with err may
// be sent to another node, and makes the next calls start after n when
// node n itself is unreachable or sealed.
func (s *Root) failedOver(n int, err error, once bool) bool {
	next := func() { s.cur.CompareAndSwap(int64(n), int64((n+1)%len(s.nodes))) }
	var re *vaultapi.ResponseError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		if re.StatusCode < 500 && re.StatusCode/100 != 3 { // Vault answered
			return false
		}
		// Sealed (503), a standby that knows no active node (500 "active
		// cluster node not found", 503 "no active Vault instance found"),
		// a standby that could not forward (307 to the active node: batch
		// calls and rotate do not follow it), or an active node failing:
		// another node may serve it.
		next()
		return !once
	case errors.As(err, &ue):
		u, perr := url.Parse(ue.URL)
		self := perr == nil && u.Host == s.nodes[n].host
		if self {
			next() // down, or too slow: try the others first next time
		}
		var oe *net.OpError
		refused := errors.As(err, &oe) && oe.Op == "dial"
		return refused && (self || !once)
	}
	return false
}

func intOf(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case float64:
		return int(x)
	case interface{ Int64() (int64, error) }:
		n, _ := x.Int64()
		return int(n)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func (s *Root) readKeyLocked(ctx context.Context) (KeyConfig, error) {
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().ReadWithContext(ctx, s.path("keys/"+s.key))
		return err
	})
	if err != nil {
		return KeyConfig{}, fmt.Errorf("vault: read key: %w", classify(err))
	}
	if sec == nil || sec.Data == nil {
		return KeyConfig{}, fmt.Errorf("vault: read key %s: %w", s.key, keystore.ErrNotFound)
	}
	d := sec.Data
	b := func(k string) bool { v, _ := d[k].(bool); return v }
	cfg := KeyConfig{Name: s.key, Exportable: b("exportable"), AllowPlaintextBackup: b("allow_plaintext_backup"),
		DeletionAllowed: b("deletion_allowed"), LatestVersion: intOf(d["latest_version"]),
		MinDecryptionVersion: intOf(d["min_decryption_version"]), MinEncryptionVersion: intOf(d["min_encryption_version"]),
		MinAvailableVersion: intOf(d["min_available_version"])}
	cfg.Type, _ = d["type"].(string)
	s.cfg = cfg
	if cfg.Exportable || cfg.AllowPlaintextBackup {
		// Checked on every read, not only at start-up: a key made exportable
		// while shredd runs must stop every epoch (so nothing is reported
		// shredded) and fail closed.
		return cfg, fmt.Errorf("vault: key %s/%s has exportable=%v allow_plaintext_backup=%v: %w: %w",
			s.mount, s.key, cfg.Exportable, cfg.AllowPlaintextBackup, keystore.ErrRootUnavailable, ErrUnsafeKey)
	}
	return cfg, nil
}

func (s *Root) readKey(ctx context.Context) (KeyConfig, error) {
	if err := s.ensure(ctx); err != nil {
		return KeyConfig{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, err := s.readKeyLocked(ctx)
	if errors.Is(err, keystore.ErrNotFound) {
		// The key was there (Check read it): gone now, with its mount or
		// alone, it is a backend shredd cannot use, never a client's
		// missing key.
		return cfg, fmt.Errorf("vault: the Transit key %s/keys/%s is gone (or its mount): %w: %v", s.mount, s.key, keystore.ErrRootUnavailable, err)
	}
	return cfg, err
}

// versionOf reads the key version of a Transit ciphertext ("vault:v3:...").
func versionOf(ct string) (int, error) {
	rest, ok := strings.CutPrefix(ct, "vault:v")
	if !ok {
		return 0, fmt.Errorf("vault: %w: not a transit ciphertext", keystore.ErrCorrupt)
	}
	n, _, ok := strings.Cut(rest, ":")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || v < 1 {
		return 0, fmt.Errorf("vault: %w: bad transit ciphertext version", keystore.ErrCorrupt)
	}
	return v, nil
}

// batch runs one Transit batch operation and returns each item's result
// field. Any item error fails the whole call, classified like a request
// error. Vault answers a batch with a failed item with status 400 and the
// per-item errors in batch_results, so the body is read whatever the status.
func (s *Root) batch(ctx context.Context, op string, items []map[string]any, field string) ([]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"batch_input": items})
	if err != nil {
		return nil, err
	}
	var res struct {
		Data struct {
			BatchResults []map[string]any `json:"batch_results"`
		} `json:"data"`
	}
	var unreadable bool
	err = s.call(ctx, false, func(ctx context.Context, n node) error {
		res.Data.BatchResults, unreadable = nil, false
		resp, err := n.raw.Logical().WriteRawWithContext(ctx, s.path(op+"/"+s.key), body)
		if resp != nil {
			defer resp.Body.Close()
			if err == nil && resp.StatusCode/100 == 3 {
				return redirected(resp)
			}
			if derr := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res); derr != nil && err == nil {
				unreadable = true
			}
		}
		return err
	})
	if unreadable {
		return nil, fmt.Errorf("vault: %s: unreadable answer: %w", op, keystore.ErrRootUnavailable)
	}
	if err != nil && len(res.Data.BatchResults) == 0 {
		return nil, fmt.Errorf("vault: %s: %w", op, classify(err))
	}
	if len(res.Data.BatchResults) != len(items) {
		return nil, fmt.Errorf("vault: %s: %d results for %d items: %w", op, len(res.Data.BatchResults), len(items), keystore.ErrRootUnavailable)
	}
	out := make([]string, len(items))
	for i, m := range res.Data.BatchResults {
		if e, _ := m["error"].(string); e != "" {
			return nil, fmt.Errorf("vault: %s: item %d: %w", op, i, classify(&vaultapi.ResponseError{StatusCode: http.StatusBadRequest, Errors: []string{e}}))
		}
		out[i], _ = m[field].(string)
		if out[i] == "" {
			return nil, fmt.Errorf("vault: %s: item %d has no %s: %w", op, i, field, keystore.ErrRootUnavailable)
		}
	}
	return out, nil
}

// redirected is the error of a call that does not follow redirects and
// got one: a standby that could not forward the request to the active
// node.
func redirected(resp *vaultapi.Response) error {
	return &vaultapi.ResponseError{HTTPMethod: resp.Request.Method, URL: resp.Request.URL.String(), StatusCode: resp.StatusCode,
		Errors: []string{"standby redirected to the active node"}}
}

func wrappedOf(cts []string) ([]keystore.Wrapped, error) {
	out := make([]keystore.Wrapped, len(cts))
	for i, ct := range cts {
		v, err := versionOf(ct)
		if err != nil {
			return nil, err
		}
		out[i] = keystore.Wrapped{Version: v, Blob: []byte(ct)}
	}
	return out, nil
}

// Wrap encrypts each key with Transit under the latest version.
func (s *Root) Wrap(ctx context.Context, keys [][]byte) ([]keystore.Wrapped, error) {
	items := make([]map[string]any, len(keys))
	for i, k := range keys {
		items[i] = map[string]any{"plaintext": base64.StdEncoding.EncodeToString(k)}
	}
	cts, err := s.batch(ctx, "encrypt", items, "ciphertext")
	if err != nil {
		return nil, err
	}
	return wrappedOf(cts)
}

// Unwrap decrypts each blob with Transit.
func (s *Root) Unwrap(ctx context.Context, blobs [][]byte) ([][]byte, error) {
	items, err := ciphertextItems(blobs)
	if err != nil {
		return nil, err
	}
	pts, err := s.batch(ctx, "decrypt", items, "plaintext")
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(pts))
	for i, p := range pts {
		if out[i], err = base64.StdEncoding.DecodeString(p); err != nil {
			return nil, fmt.Errorf("vault: decrypt: %w: plaintext not base64", keystore.ErrCorrupt)
		}
	}
	return out, nil
}

// ciphertextItems are the batch items of blobs, each a Transit ciphertext
// of a known version, for decrypt or rewrap.
func ciphertextItems(blobs [][]byte) ([]map[string]any, error) {
	items := make([]map[string]any, len(blobs))
	for i, b := range blobs {
		if _, err := versionOf(string(b)); err != nil {
			return nil, err
		}
		items[i] = map[string]any{"ciphertext": string(b)}
	}
	return items, nil
}

// Rewrap re-encrypts each blob under the latest version inside Vault; the
// bucket keys never leave Vault in the process.
func (s *Root) Rewrap(ctx context.Context, blobs [][]byte) ([]keystore.Wrapped, error) {
	items, err := ciphertextItems(blobs)
	if err != nil {
		return nil, err
	}
	cts, err := s.batch(ctx, "rewrap", items, "ciphertext")
	if err != nil {
		return nil, err
	}
	return wrappedOf(cts)
}

// Rotate adds a new latest version of the Transit key. Its request is sent
// at most once per call (see call): a rotation whose answer was lost makes
// Rotate fail, and the epoch, retried, finds and reuses it.
func (s *Root) Rotate(ctx context.Context) (int, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	before, err := s.readKey(ctx)
	if err != nil {
		return 0, err
	}
	// Sent without following a standby's redirect: a standby redirects when
	// forwarding failed, perhaps after the active node rotated; following
	// the redirect to a newly elected active node would rotate twice.
	err = s.call(ctx, true, func(ctx context.Context, n node) error {
		resp, err := n.raw.Logical().WriteRawWithContext(ctx, s.path("keys/"+s.key+"/rotate"), nil)
		if resp != nil {
			defer resp.Body.Close()
		}
		if err == nil && resp.StatusCode/100 == 3 {
			return redirected(resp)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("vault: rotate: %w", classify(err))
	}
	cfg, err := s.readKey(ctx)
	if err != nil {
		return 0, err
	}
	if cfg.LatestVersion <= before.LatestVersion {
		return 0, fmt.Errorf("vault: rotate: latest version %d after rotating from %d: %w", cfg.LatestVersion, before.LatestVersion, keystore.ErrRootUnavailable)
	}
	return cfg.LatestVersion, nil
}

// Trim destroys every version below minVersion: it raises
// min_decryption_version and min_encryption_version to minVersion (so the
// old versions stop working at once) and then trims the key ring with
// min_available_version, which deletes them from Vault's storage.
func (s *Root) Trim(ctx context.Context, minVersion int) ([]int, error) {
	cfg, err := s.readKey(ctx)
	if err != nil {
		return nil, err
	}
	if minVersion > cfg.LatestVersion {
		return nil, fmt.Errorf("vault: trim to %d above latest %d: %w", minVersion, cfg.LatestVersion, shredd.ErrInvalid)
	}
	avail := max(cfg.MinAvailableVersion, 1)
	if minVersion <= avail {
		return nil, nil
	}
	if cfg.MinDecryptionVersion < minVersion || cfg.MinEncryptionVersion < minVersion {
		if _, err := s.write(ctx, "keys/"+s.key+"/config", map[string]any{
			"min_decryption_version": minVersion, "min_encryption_version": minVersion}); err != nil {
			return nil, fmt.Errorf("vault: trim: config: %w", err)
		}
	}
	if _, err := s.write(ctx, "keys/"+s.key+"/trim", map[string]any{"min_available_version": minVersion}); err != nil {
		return nil, fmt.Errorf("vault: trim: %w", err)
	}
	after, err := s.readKey(ctx)
	if err != nil {
		return nil, err
	}
	if after.MinAvailableVersion < minVersion {
		return nil, fmt.Errorf("vault: trim: min_available_version is %d after trimming to %d: %w", after.MinAvailableVersion, minVersion, keystore.ErrRootUnavailable)
	}
	var retired []int
	for v := avail; v < minVersion; v++ {
		retired = append(retired, v)
	}
	return retired, nil
}

// Versions reads the latest and the oldest available version.
func (s *Root) Versions(ctx context.Context) (keystore.Versions, error) {
	cfg, err := s.readKey(ctx)
	if err != nil {
		return keystore.Versions{}, err
	}
	return keystore.Versions{Latest: cfg.LatestVersion, MinAvailable: max(cfg.MinAvailableVersion, 1)}, nil
}

// Policy returns the Vault policy (HCL) that grants shredd exactly the
// Transit paths it uses on one key, and nothing else. docs/operations.md
// shows it for the default mount and key; a test runs the conformance suite
// with a token holding only this policy.
func Policy(mount, key string) string {
	p := strings.Trim(mount, "/") + "/"
	return fmt.Sprintf(`# shredd root store: one Transit key, nothing else.
path "%[1]skeys/%[2]s" {
  capabilities = ["read", "create", "update"]
}
path "%[1]skeys/%[2]s/rotate" {
  capabilities = ["update"]
}
path "%[1]skeys/%[2]s/config" {
  capabilities = ["update"]
}
path "%[1]skeys/%[2]s/trim" {
  capabilities = ["update"]
}
path "%[1]sencrypt/%[2]s" {
  capabilities = ["update"]
}
path "%[1]sdecrypt/%[2]s" {
  capabilities = ["update"]
}
path "%[1]srewrap/%[2]s" {
  capabilities = ["update"]
}
# the Transit key that wraps the shared secrets (never rotated).
path "%[1]skeys/%[2]s-secrets" {
  capabilities = ["read", "create", "update"]
}
path "%[1]sencrypt/%[2]s-secrets" {
  capabilities = ["update"]
}
path "%[1]sdecrypt/%[2]s-secrets" {
  capabilities = ["update"]
}
`, p, key) + HeadPolicy("secret", key)
}

// HeadPolicy returns the part of the Vault policy (HCL) that lets shredd
// keep, for the Transit key key, in the KV v2 mount kvMount
// (Config.HeadMount): the marks of durable streams (shredd/<key>/marks/),
// the shared secrets' wrapped bundle (shredd/<key>/secrets) and the forget
// records (shredd/<key>/forgets/: written, listed, read, and deleted once
// an epoch has made them useless); nothing else of the mount.
func HeadPolicy(kvMount, key string) string {
	return fmt.Sprintf(`# the token's own capabilities: shredd checks at start that it may use
# its KV paths (also in Vault's default policy).
path "sys/capabilities-self" {
  capabilities = ["update"]
}
# shredd shared secrets, wrapped: written once by the first node.
path "%[1]s/data/shredd/%[2]s/secrets" {
  capabilities = ["read", "create", "update"]
}
# shredd's installation that owns the Transit key (one per key).
path "%[1]s/data/shredd/%[2]s/owner" {
  capabilities = ["read", "create", "update"]
}
# shredd high-water marks of durable streams (the registration WAL's),
# one per data directory.
path "%[1]s/data/shredd/%[2]s/marks/*" {
  capabilities = ["read", "create", "update"]
}
# shredd forget records: one per group of forgets.
path "%[1]s/data/shredd/%[2]s/forgets/*" {
  capabilities = ["read", "create", "update"]
}
path "%[1]s/metadata/shredd/%[2]s/forgets/" {
  capabilities = ["list"]
}
path "%[1]s/metadata/shredd/%[2]s/forgets/*" {
  capabilities = ["delete"]
}
`, strings.Trim(kvMount, "/"), key)
}
