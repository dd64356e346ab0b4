package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/translog"
)

// index is a plaintext-held store of the tests: what an ANN index keeps
// (vectors by artifact id), purged through the kit's callback.
type index struct {
	mu      sync.Mutex
	vectors map[string]string // artifact id -> kind
	calls   int
}

func (ix *index) put(id, kind string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.vectors[id] = kind
}

func (ix *index) has(id string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	_, ok := ix.vectors[id]
	return ok
}

func (ix *index) purge(_ context.Context, _ string, artifacts []string) ([]string, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.calls++
	var purged []string
	for _, id := range artifacts {
		if _, ok := ix.vectors[id]; ok {
			delete(ix.vectors, id)
			purged = append(purged, id)
		}
	}
	return purged, nil
}

func (ix *index) inventory() []client.InventoryItem {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []client.InventoryItem
	for id, kind := range ix.vectors {
		out = append(out, client.InventoryItem{ID: id, Kind: kind})
	}
	return out
}

// TestHolderKit drives a holder through a whole erasure on the real
// service: registration, a plaintext-held embedding of a record, a forget,
// the kit's purge round (the callback deletes the vector, the kit signs
// the ack), the forget reaching erased, the attestation naming the ack
// whose signature verifies over attest.AckMessage, a clean inventory, and
// a contradicted ack when the holder still lists what it acked.
func TestHolderKit(t *testing.T) {
	clk := shreddtest.NewClock()
	s := newServerWith(t, clk.Now)
	admin := s.client("")
	ctx := t.Context()
	setupKinds(t, admin, "episodic", "embedding")

	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	_, raw, err := s.tokens.Create(ctx, "ann-1", []string{access.ScopeRegister}, "ann-index-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.NewHolder(s.client(raw), "ann-index-1", key)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's own token cannot register it: that is the admin's.
	_, err = h.Register(ctx, nil)
	wantError(t, err, 403, "forbidden")
	if created, err := h.Register(ctx, admin); err != nil || !created {
		t.Fatalf("Register: created %v, %v", created, err)
	}
	if created, err := h.Register(ctx, admin); err != nil || created {
		t.Fatalf("Register again with the same key: created %v, %v", created, err)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	_, _, err = admin.RegisterHolder(ctx, "ann-index-1", other.Public().(ed25519.PublicKey))
	wantError(t, err, 409, "conflict")
	if _, _, err := admin.RegisterHolder(ctx, "x", ed25519.PublicKey{1, 2}); err == nil {
		t.Fatal("RegisterHolder with a short key: no error")
	}

	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("Alice prefers green tea.")})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "episodic", Plaintext: []byte("Bob likes coffee.")})
	if err != nil {
		t.Fatal(err)
	}
	ix := &index{vectors: map[string]string{}}
	var vecs []string
	for _, parent := range []string{rec.Artifact, rec.Artifact, keep.Artifact} {
		art, err := s.client(raw).Register(ctx, client.RegisterRequest{Parents: []string{parent}, Kind: "embedding"})
		if err != nil {
			t.Fatal(err)
		}
		ix.put(art.ID, "embedding")
		vecs = append(vecs, art.ID)
	}
	if rep, err := h.ReportInventory(ctx, ix.inventory()); err != nil || !rep.Clean() || rep.Items != 3 {
		t.Fatalf("inventory before the forget: %+v %v", rep, err)
	}

	// No forget yet: no work, the callback is not called.
	round, err := h.PurgeOnce(ctx, ix.purge)
	if err != nil || len(round.Work) != 0 || ix.calls != 0 {
		t.Fatalf("PurgeOnce with no forget: %+v %v (calls %d)", round, err, ix.calls)
	}

	f, err := admin.Forget(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	work, err := h.Purges(ctx)
	if err != nil || len(work) != 1 || work[0].Forget != f.ID {
		t.Fatalf("Purges after the forget: %+v %v", work, err)
	}
	if got := slices.Sorted(slices.Values(work[0].Artifacts)); !slices.Equal(got, slices.Sorted(slices.Values(vecs[:2]))) {
		t.Fatalf("purge work %v, want the two vectors of alice's record %v", got, vecs[:2])
	}
	// The audit scope may read a holder's work too.
	if w, err := s.client(s.token(access.ScopeAudit)).Purges(ctx, "ann-index-1"); err != nil || len(w) != 1 {
		t.Fatalf("Purges with the audit scope: %+v %v", w, err)
	}

	round, err = h.PurgeOnce(ctx, ix.purge)
	if err != nil || round.Err() != nil {
		t.Fatalf("PurgeOnce: %v %v", err, round.Err())
	}
	if len(round.Acked) != 1 || len(round.Acked[0].Closed) != 2 || len(round.Acked[0].Missing) != 0 {
		t.Fatalf("PurgeOnce acked %+v", round.Acked)
	}
	if ix.has(vecs[0]) || ix.has(vecs[1]) || !ix.has(vecs[2]) {
		t.Fatal("the callback did not purge exactly alice's vectors")
	}
	if work, err := h.Purges(ctx); err != nil || len(work) != 0 {
		t.Fatalf("Purges after the ack: %+v %v", work, err)
	}
	if rep, err := h.ReportInventory(ctx, ix.inventory()); err != nil || !rep.Clean() || rep.Items != 1 {
		t.Fatalf("inventory after the purge: %+v %v", rep, err)
	}

	if _, err := admin.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute) // past the key cache TTL
	f, err = admin.Verify(ctx, f.ID)
	if err != nil || f.State != client.StateErased {
		t.Fatalf("Verify: %s %v %+v", f.State, err, f.Verification)
	}
	att, err := admin.Attestation(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.Open(att, s.attPub)
	if err != nil {
		t.Fatal(err)
	}
	acks := st.Predicate.HolderAcks
	if len(acks) != 1 || acks[0].Holder != "ann-index-1" || !bytes.Equal(acks[0].PublicKey, key.Public().(ed25519.PublicKey)) {
		t.Fatalf("attestation holder acks: %+v", acks)
	}
	// The signature is over the message of docs/attestation.md §6, built
	// here by hand from the spec, not with the package that signed it.
	ids := slices.Sorted(slices.Values(acks[0].Artifacts))
	msg := "shredd/v1/holder-ack\nforget " + f.ID + "\nholder ann-index-1\n"
	for _, id := range ids {
		msg += "artifact " + id + "\n"
	}
	if !ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(msg), acks[0].Signature) {
		t.Fatal("the ack's signature does not verify over the documented message")
	}

	// A holder that acked a purge and still lists the artifact: the
	// inventory says so.
	rep, err := h.ReportInventory(ctx, append(ix.inventory(), client.InventoryItem{ID: vecs[0], Kind: "embedding"}))
	if err != nil || rep.Clean() || !slices.Equal(rep.ContradictedAcks, []string{vecs[0]}) {
		t.Fatalf("inventory contradicting an ack: %+v %v", rep, err)
	}
	rep, err = h.ReportInventory(ctx, []client.InventoryItem{{ID: "00000000000000000000000000000001", Kind: "prompt-cache"}})
	if err != nil || rep.Clean() || len(rep.UnknownArtifacts) != 1 || len(rep.UnknownKinds) != 1 {
		t.Fatalf("inventory of unknown things: %+v %v", rep, err)
	}
	if rep, err := h.ReportInventory(ctx, nil); err != nil || !rep.Clean() || rep.Items != 0 {
		t.Fatalf("empty inventory: %+v %v", rep, err)
	}
}

// TestHolderKitRefusals: the kit never signs for an artifact the forget
// did not ask for, acks what a failing callback did purge, reports the
// failure, and the server refuses an ack signed by another key.
func TestHolderKitRefusals(t *testing.T) {
	_, admin := serverWithKinds(t, "episodic", "embedding")
	ctx := t.Context()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	h, err := client.NewHolder(admin, "cache-1", key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"carol@example.com"}, Kind: "episodic", Plaintext: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	var arts []string
	for range 2 {
		a, err := admin.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "cache-1"})
		if err != nil {
			t.Fatal(err)
		}
		arts = append(arts, a.ID)
	}
	f, err := admin.Forget(ctx, "carol@example.com")
	if err != nil {
		t.Fatal(err)
	}

	round, err := h.PurgeOnce(ctx, func(context.Context, string, []string) ([]string, error) {
		return []string{rec.Artifact}, nil // not asked for: a sealed record
	})
	if err != nil || round.Err() == nil || !strings.Contains(round.Err().Error(), "did not ask for") || len(round.Acked) != 0 {
		t.Fatalf("PurgeOnce with a foreign id: %+v %v", round, err)
	}

	boom := errors.New("disk full")
	round, err = h.PurgeOnce(ctx, func(_ context.Context, _ string, ids []string) ([]string, error) {
		return ids[:1], boom // purged one, failed on the other
	})
	if err != nil || !errors.Is(round.Err(), boom) || len(round.Acked) != 1 || len(round.Acked[0].Closed) != 1 || len(round.Acked[0].Missing) != 1 {
		t.Fatalf("PurgeOnce with a partial failure: %+v %v", round, err)
	}
	work, err := h.Purges(ctx)
	if err != nil || len(work) != 1 || len(work[0].Artifacts) != 1 || !slices.Contains(arts, work[0].Artifacts[0]) {
		t.Fatalf("work after a partial ack: %+v %v (registered %v)", work, err, arts)
	}

	// An ack signed by another key is refused; Client.Ack sends a
	// signature made elsewhere.
	wrong := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{10}, ed25519.SeedSize))
	sig := ed25519.Sign(wrong, attest.AckMessage(f.ID, "cache-1", work[0].Artifacts))
	_, err = admin.Ack(ctx, f.ID, "cache-1", work[0].Artifacts, sig)
	wantError(t, err, 400, "invalid_signature")
	sig = ed25519.Sign(key, attest.AckMessage(f.ID, "cache-1", work[0].Artifacts))
	if res, err := admin.Ack(ctx, f.ID, "cache-1", work[0].Artifacts, sig); err != nil || len(res.Closed) != 1 || len(res.Missing) != 0 {
		t.Fatalf("Ack signed elsewhere: %+v %v", res, err)
	}

	if _, err := client.NewHolder(admin, "x", key[:10]); err == nil {
		t.Fatal("NewHolder with a short key: no error")
	}
	if _, err := client.NewHolder(nil, "x", key); err == nil {
		t.Fatal("NewHolder with no client: no error")
	}
}

// TestHolderRun: Run purges the work of a forget made while it runs and
// stops with the context.
func TestHolderRun(t *testing.T) {
	_, admin := serverWithKinds(t, "episodic", "embedding")
	h, err := client.NewHolder(admin, "idx", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{11}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := h.Register(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"dan@example.com"}, Kind: "episodic", Plaintext: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := admin.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "idx"})
	if err != nil {
		t.Fatal(err)
	}
	ix := &index{vectors: map[string]string{a.ID: "embedding"}}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	acked := make(chan client.AckResult, 1)
	done := make(chan error, 1)
	go func() {
		done <- h.Run(runCtx, 20*time.Millisecond, ix.purge, func(r client.PurgeRound) {
			for _, res := range r.Acked {
				select {
				case acked <- res:
				default:
				}
			}
		})
	}()
	if _, err := admin.Forget(ctx, "dan@example.com"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-acked:
		if !slices.Equal(res.Closed, []string{a.ID}) {
			t.Fatalf("Run acked %+v", res)
		}
	case <-time.After(3 * time.Minute): // only a hang, even on a loaded machine
		t.Fatal("Run did not ack the forget's work")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if ix.has(a.ID) {
		t.Fatal("the vector was not purged")
	}
	if err := h.Run(ctx, 0, ix.purge, nil); err == nil {
		t.Fatal("Run with interval 0: no error")
	}
}

// TestLogCalls: the log key, an inclusion proof of an entry of the export
// checked with translog against that key, and a consistency proof from a
// saved checkpoint to the current one; and their errors.
func TestLogCalls(t *testing.T) {
	s, c, clk := clockedWithRecord(t, "erin@example.com", "e")
	ctx := t.Context()
	vkey, err := c.LogKey(ctx)
	if err != nil || vkey != s.logVKey {
		t.Fatalf("LogKey: %q %v, want %q", vkey, err, s.logVKey)
	}
	if _, want := testkeys.LogKey(); vkey != want {
		t.Fatalf("LogKey %q is not the test log key", vkey)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := translog.OpenCheckpoint(saved, v)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Forget(ctx, "erin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if f, err = c.Verify(ctx, f.ID); err != nil || f.State != client.StateErased {
		t.Fatalf("Verify: %s %v", f.State, err)
	}
	exp, err := c.Export(ctx, f.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Read(bytes.NewReader(exp))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Entries) == 0 {
		t.Fatal("the export holds no log entry")
	}
	for _, e := range b.Entries {
		p, err := c.InclusionProof(ctx, e.Index, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := translog.CheckProof(p, e.Data, v); err != nil {
			t.Fatalf("entry %d (%s): %v\n%s", e.Index, e.Event, err, p)
		}
		// Against the saved, older tree: only the entries it held.
		p, err = c.InclusionProof(ctx, e.Index, old.Size)
		switch {
		case e.Index < old.Size && err != nil:
			t.Fatalf("proof of entry %d at size %d: %v", e.Index, old.Size, err)
		case e.Index >= old.Size:
			wantError(t, err, 404, "not_found")
		default:
			if got, err := translog.CheckProof(p, e.Data, v); err != nil || got.Size != old.Size {
				t.Fatalf("proof at the old size: %+v %v", got, err)
			}
		}
	}

	cur, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now, err := translog.OpenCheckpoint(cur, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, newSize := range []int64{0, now.Size} {
		raw, err := c.ConsistencyProof(ctx, old.Size, newSize)
		if err != nil {
			t.Fatal(err)
		}
		p, err := translog.ParseConsistencyProof(raw)
		if err != nil {
			t.Fatal(err)
		}
		if p.Old != old.Size || p.New != now.Size {
			t.Fatalf("consistency proof %d -> %d, want %d -> %d", p.Old, p.New, old.Size, now.Size)
		}
		if err := translog.CheckConsistency(old, now, p.Hashes); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.ConsistencyProof(ctx, now.Size+1, now.Size)
	wantError(t, err, 400, "invalid_size")
	_, err = c.InclusionProof(ctx, now.Size+5, 0)
	wantError(t, err, 404, "not_found")
	if _, err := c.InclusionProof(ctx, -1, 0); err == nil {
		t.Fatal("InclusionProof(-1): no error")
	}
	_, err = s.client(s.token(access.ScopeEncrypt)).LogKey(ctx)
	wantError(t, err, 403, "forbidden")
}

// TestClientImports: the client stays light for the memory writers that
// link it: outside the standard library it imports only attest (which
// itself imports only the standard library) and envelope, the format it
// seals to on the client (with golang.org/x/crypto's hkdf and cryptobyte),
// never SQLite or the key tree.
func TestClientImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{"github.com/shredd/shredd/api/client", "github.com/shredd/shredd/attest", "github.com/shredd/shredd/envelope",
		"golang.org/x/crypto/cryptobyte", "golang.org/x/crypto/cryptobyte/asn1", "golang.org/x/crypto/hkdf"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("api/client depends on %v, want only %v", got, want)
	}
}
