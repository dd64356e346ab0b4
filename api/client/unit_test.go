package client_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/api/client"
)

// binServer is the real shredd binary serving a fresh data directory on
// 127.0.0.1, for the tests of what a read costs a writer.
type binServer struct {
	t          *testing.T
	bin, data  string
	base       string
	admin      *client.Client
	adminToken string
}

func startBinServer(t *testing.T, args ...string) *binServer {
	t.Helper()
	bin, err := shreddBinary()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	cmd, base, err := serveBinary(bin, data, args...)
	if cmd != nil {
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	s := &binServer{t: t, bin: bin, data: data, base: base, adminToken: strings.TrimSpace(string(tok))}
	s.admin = s.client(s.adminToken)
	setupKinds(t, s.admin, "episodic", "summary", "embedding")
	return s
}

func (s *binServer) client(token string) *client.Client {
	s.t.Helper()
	c, err := client.New(s.base, token)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// writer returns a client with a new token of the encrypt, decrypt and
// register scopes, made with shredd token create and its extra flags
// (--reads inherit).
func (s *binServer) writer(name string, flags ...string) *client.Client {
	s.t.Helper()
	args := append([]string{"token", "create", "--data-dir", s.data, "--name", name,
		"--scopes", "encrypt,decrypt,register"}, flags...)
	out, err := exec.Command(s.bin, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.t.Fatalf("shredd %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		s.t.Fatal(err)
	}
	tok := strings.TrimSpace(string(out))
	if !strings.HasPrefix(tok, "shredd_") {
		s.t.Fatalf("no token in the output of shredd token create: %q", out)
	}
	return s.client(tok)
}

// record seals a record about subject with c.
func record(t *testing.T, c *client.Client, subject, pt string) client.EncryptResponse {
	t.Helper()
	r, err := c.Encrypt(context.Background(), client.EncryptRequest{Subjects: []string{subject}, Kind: "episodic",
		Plaintext: []byte(pt)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantUndeclared checks that err is the 409 undeclared_derivation naming
// exactly leases.
func wantUndeclared(t *testing.T, err error, leases ...string) {
	t.Helper()
	if !client.IsUndeclaredDerivation(err) {
		t.Fatalf("error %v, want 409 undeclared_derivation", err)
	}
	e, _ := client.AsError(err)
	want := slices.Sorted(slices.Values(leases))
	if !slices.Equal(e.Leases, want) {
		t.Fatalf("undeclared leases %v, want %v", e.Leases, want)
	}
	if e.Status != 409 || e.Detail == "" {
		t.Fatalf("problem %+v: want a 409 with a detail", e)
	}
}

// reads returns what GET /v1/artifacts/{id} says of the artifact's reads:
// lease id -> how it was closed.
func reads(t *testing.T, c *client.Client, artifact string) map[string]string {
	t.Helper()
	a, err := c.Artifact(context.Background(), artifact)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range a.Reads {
		out[r.Lease] = r.How
	}
	return out
}

// TestUndeclaredDerivation: a write of a token that read and neither
// names the read nor declares itself independent is refused (the default
// policy), with the lease in the typed error, on every write route; each
// way of declaring is accepted and recorded.
func TestUndeclaredDerivation(t *testing.T) {
	s := startBinServer(t)
	ctx := context.Background()
	w := s.writer("summarizer")
	alice := record(t, s.admin, "alice@example.com", "Alice prefers green tea.")
	d, err := w.Decrypt(ctx, client.DecryptRequest{Ciphertext: alice.Ciphertext})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Lease.ReleasedAt.IsZero() {
		t.Fatalf("a plain decrypt released its lease: %+v", d.Lease)
	}
	lease := d.Lease.ID
	bob := client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "summary", Plaintext: []byte("Bob: tea")}

	_, err = w.Encrypt(ctx, bob)
	wantUndeclared(t, err, lease)
	_, err = w.EncryptRaw(ctx, bob)
	wantUndeclared(t, err, lease)
	_, err = w.Seal(ctx, bob)
	wantUndeclared(t, err, lease)
	_, err = w.Register(ctx, client.RegisterRequest{Subjects: []string{"bob@example.com"}, Kind: "embedding", Holder: "ann-1"})
	wantUndeclared(t, err, lease)
	res, err := w.EncryptBatch(ctx, []client.EncryptRequest{bob, withIndependent(bob)})
	if err != nil {
		t.Fatal(err)
	}
	wantUndeclared(t, res[0].Err, lease)
	if res[1].Err != nil {
		t.Fatalf("the independent item failed: %v", res[1].Err)
	}
	sealed, err := w.SealMany(ctx, []client.EncryptRequest{bob})
	if err != nil {
		t.Fatal(err)
	}
	wantUndeclared(t, sealed[0].Err, lease)

	// Released, the read is still attributable until its expiry.
	if _, err := w.ReleaseLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	_, err = w.Encrypt(ctx, bob)
	wantUndeclared(t, err, lease)

	// Each declaration, recorded with the artifact.
	named := bob
	named.Leases = []string{lease}
	n, err := w.Encrypt(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	if n.LineageSize != 2 || len(n.Inherited) != 0 {
		t.Fatalf("named: %+v, want lineage 2 and nothing inherited", n)
	}
	of := bob
	of.IndependentOf = []string{lease}
	i1, err := w.Encrypt(ctx, of)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := w.EncryptRaw(ctx, withIndependent(bob))
	if err != nil {
		t.Fatal(err)
	}
	i3, err := w.EncryptRaw(ctx, of)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := w.Register(ctx, client.RegisterRequest{Subjects: []string{"bob@example.com"}, Kind: "embedding",
		Holder: "ann-1", IndependentOf: []string{lease}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, artifact, how string
		lineage             int
	}{
		{"named", n.Artifact, client.ReadNamed, 2},
		{"independent_of", i1.Artifact, client.ReadIndependent, 1},
		{"raw independent", i2.Artifact, client.ReadIndependent, 1},
		{"raw independent_of", i3.Artifact, client.ReadIndependent, 1},
		{"register independent_of", reg.ID, client.ReadIndependent, 1},
		{"batch independent", res[1].Artifact, client.ReadIndependent, 1},
	} {
		if got := reads(t, s.admin, c.artifact); got[lease] != c.how {
			t.Errorf("%s: reads %v, want %s %s", c.name, got, lease, c.how)
		}
		a, err := s.admin.Artifact(ctx, c.artifact)
		if err != nil {
			t.Fatal(err)
		}
		if a.LineageSize != c.lineage {
			t.Errorf("%s: lineage %d, want %d", c.name, a.LineageSize, c.lineage)
		}
	}

	// Another token's writes do not answer for this token's reads.
	if _, err := s.writer("other").Encrypt(ctx, bob); err != nil {
		t.Fatalf("another token: %v", err)
	}
}

func withIndependent(r client.EncryptRequest) client.EncryptRequest {
	r.Independent = true
	return r
}

// TestInheritPolicy: a token created with --reads inherit gets the
// lineage of the reads its write did not declare, listed in the answer,
// so that forgetting the read subject makes the write unreadable.
func TestInheritPolicy(t *testing.T) {
	s := startBinServer(t, "--cache-ttl", "1s")
	ctx := context.Background()
	w := s.writer("summarizer", "--reads", "inherit")
	alice := record(t, s.admin, "alice@example.com", "Alice prefers green tea.")
	d, err := w.Decrypt(ctx, client.DecryptRequest{Ciphertext: alice.Ciphertext})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "summary", Plaintext: []byte("Bob likes what Alice likes.")}
	got, err := w.Encrypt(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Inherited, []string{d.Lease.ID}) || got.LineageSize != 2 {
		t.Fatalf("inherit: %+v, want lease %s inherited and lineage 2", got, d.Lease.ID)
	}
	if r := reads(t, s.admin, got.Artifact); r[d.Lease.ID] != client.ReadInherited {
		t.Fatalf("reads %v, want %s inherited", r, d.Lease.ID)
	}
	raw, err := w.EncryptRaw(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(raw.Inherited, []string{d.Lease.ID}) || raw.LineageSize != 2 {
		t.Fatalf("raw inherit: %+v", raw)
	}
	sealed, err := w.Seal(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sealed.Inherited, []string{d.Lease.ID}) || sealed.LineageSize != 2 {
		t.Fatalf("seal inherit: %+v", sealed)
	}
	if _, err := s.admin.Forget(ctx, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{got.Ciphertext, sealed.Ciphertext()} {
		if _, err := s.admin.Decrypt(ctx, client.DecryptRequest{Ciphertext: ct}); !client.IsShredded(err) {
			t.Fatalf("a write that inherited alice's read, after alice's forget: %v, want 410", err)
		}
	}
}

// TestUnit: a unit of work labels its calls, records its reads and names
// them on each of its writes, on every route; its writes do not answer
// for another unit's reads, a write outside every unit does; Close
// releases its leases and ends it.
func TestUnit(t *testing.T) {
	s := startBinServer(t)
	ctx := context.Background()
	w := s.writer("summarizer")
	alice := record(t, s.admin, "alice@example.com", "Alice prefers green tea.")
	carol := record(t, s.admin, "carol@example.com", "Carol hikes.")
	rawDan, err := s.admin.EncryptRaw(ctx, client.EncryptRequest{Subjects: []string{"dan@example.com"}, Kind: "episodic",
		Plaintext: []byte("Dan sails.")})
	if err != nil {
		t.Fatal(err)
	}

	u := w.Unit()
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(u.ID()) || u.ID() == w.Unit().ID() {
		t.Fatalf("unit id %q: want 16 random hex digits", u.ID())
	}
	d, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: alice.Ciphertext, Holder: "summarizer-1"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Lease.Unit != u.ID() {
		t.Fatalf("lease %+v: want unit %s", d.Lease, u.ID())
	}
	batch, err := u.DecryptBatch(ctx, []client.DecryptRequest{{Ciphertext: carol.Ciphertext}, {Ciphertext: "shredd:v1:AAAA"}})
	if err != nil {
		t.Fatal(err)
	}
	if batch[0].Err != nil || batch[1].Err == nil {
		t.Fatalf("batch: %+v", batch)
	}
	rd, err := u.DecryptRaw(ctx, rawDan.Envelope, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{d.Lease.ID, batch[0].Lease.ID, rd.LeaseID}
	if got := u.Leases(); !slices.Equal(got, want) {
		t.Fatalf("Leases() = %v, want %v", got, want)
	}

	// Another unit of the same token, and its writes: they do not answer
	// for u's reads; a write outside every unit does.
	v := w.Unit()
	if _, err := v.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"erin@example.com"}, Kind: "episodic",
		Plaintext: []byte("Erin, alone")}); err != nil {
		t.Fatalf("another unit's write: %v", err)
	}
	_, err = w.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"erin@example.com"}, Kind: "episodic", Plaintext: []byte("x")})
	wantUndeclared(t, err, want...)

	// Every write of u names its three reads (and the caller's own).
	own := record(t, s.admin, "frank@example.com", "Frank")
	fd, err := s.admin.Decrypt(ctx, client.DecryptRequest{Ciphertext: own.Ciphertext})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "summary", Plaintext: []byte("a summary")}
	e, err := u.Encrypt(ctx, client.EncryptRequest{Subjects: bob.Subjects, Kind: bob.Kind, Plaintext: bob.Plaintext,
		Leases: []string{fd.Lease.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if e.LineageSize != 5 {
		t.Fatalf("unit encrypt: lineage %d, want 5 (bob, alice, carol, dan, frank)", e.LineageSize)
	}
	eb, err := u.EncryptBatch(ctx, []client.EncryptRequest{bob, bob})
	if err != nil {
		t.Fatal(err)
	}
	er, err := u.EncryptRaw(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := u.Seal(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	sm, err := u.SealMany(ctx, []client.EncryptRequest{bob})
	if err != nil {
		t.Fatal(err)
	}
	rg, err := u.Register(ctx, client.RegisterRequest{Subjects: bob.Subjects, Kind: "embedding", Holder: "summarizer-1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"encrypt": e.Artifact, "batch 0": eb[0].Artifact, "batch 1": eb[1].Artifact,
		"raw": er.Artifact, "seal": sl.Artifact, "seal many": sm[0].Artifact, "register": rg.ID} {
		if id == "" {
			t.Fatalf("%s: no artifact (%+v %+v)", name, eb, sm)
		}
		got := reads(t, s.admin, id)
		for _, l := range want {
			if got[l] != client.ReadNamed {
				t.Errorf("%s: reads %v, want %s named", name, got, l)
			}
		}
		a, err := s.admin.Artifact(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.LineageSize < 4 {
			t.Errorf("%s: lineage %d, want bob, alice, carol and dan", name, a.LineageSize)
		}
	}

	// A unit refuses a request labelled with another unit.
	if _, err := u.Encrypt(ctx, client.EncryptRequest{Unit: "other", Subjects: bob.Subjects, Kind: "summary"}); err == nil {
		t.Fatal("a request of another unit through u: no error")
	}

	// Close releases the leases and ends the unit.
	if err := u.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range want {
		got, err := w.ReleaseLease(ctx, l) // releasing again answers the lease
		if err != nil {
			t.Fatal(err)
		}
		if got.ReleasedAt.IsZero() {
			t.Fatalf("lease %s not released by Close", l)
		}
	}
	if _, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: alice.Ciphertext}); !errors.Is(err, client.ErrUnitClosed) {
		t.Fatalf("after Close: %v, want ErrUnitClosed", err)
	}
	if _, err := u.Encrypt(ctx, bob); !errors.Is(err, client.ErrUnitClosed) {
		t.Fatalf("after Close: %v, want ErrUnitClosed", err)
	}
	if err := u.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Forgetting a subject a unit read makes its writes unreadable.
	if _, err := s.admin.Forget(ctx, "carol@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.Decrypt(ctx, client.DecryptRequest{Ciphertext: sl.Ciphertext()}); !client.IsShredded(err) {
		t.Fatalf("the unit's seal after carol's forget: %v, want 410", err)
	}
	if _, err := s.admin.DecryptRaw(ctx, er.Envelope, nil, ""); !client.IsShredded(err) {
		t.Fatalf("the unit's raw write after carol's forget: %v, want 410", err)
	}
}

// TestUnitCloseErrors: Close returns the failed releases, joined, and
// still ends the unit.
func TestUnitCloseErrors(t *testing.T) {
	s := startBinServer(t)
	ctx := context.Background()
	rec := record(t, s.admin, "alice@example.com", "x")
	u := s.admin.Unit()
	if _, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: rec.Ciphertext}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := u.Close(cctx); !errors.Is(err, context.Canceled) { // the release was never sent
		t.Fatalf("Close with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: rec.Ciphertext}); !errors.Is(err, client.ErrUnitClosed) {
		t.Fatalf("after a failed Close: %v, want ErrUnitClosed", err)
	}
}
