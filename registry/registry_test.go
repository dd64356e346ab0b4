package registry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// liveRef creates subject's key and returns its ref.
func liveRef(t *testing.T, st *shreddtest.Stack, subject string) envelope.Ref {
	t.Helper()
	k, err := st.Keys.KeyWithSubject(context.Background(), st.Hasher.SID(subject), subject)
	if err != nil {
		t.Fatal(err)
	}
	return k.Ref
}

// leaseStack is a stack of the test kinds on a test clock, its leases
// valid for a minute.
func leaseStack(t *testing.T) (*shreddtest.Stack, *shreddtest.Clock) {
	t.Helper()
	clock := shreddtest.NewClock()
	return shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds, Now: clock.Now, Registry: registry.Options{LeaseTTL: time.Minute}}), clock
}

// readArtifact reads artifact id and its lineage from reg.
func readArtifact(t *testing.T, reg *registry.Registry, id shredd.ID) (shredd.Artifact, []envelope.Ref) {
	t.Helper()
	ctx := context.Background()
	a, aErr := reg.GetArtifact(ctx, id)
	refs, refsErr := reg.LineageOf(ctx, id)
	if err := errors.Join(aErr, refsErr); err != nil {
		t.Fatal(err)
	}
	return a, refs
}

// Settle moves the staged lineage and parents of registrations into the
// tables read by subject and by parent; readers by artifact and the
// readers of lineage_all see them before and after alike.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	reg := st.Registry
	rec := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "record")
	sum := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "summary", Subjects: []string{"bob"}, Parents: []shredd.ID{rec.Artifact}}, "sum")
	before, beforeRefs := readArtifact(t, reg, sum.Artifact)
	if len(before.Parents) != 1 || before.Parents[0] != rec.Artifact || before.Lineage != 2 || len(beforeRefs) != 2 {
		t.Fatalf("summary before settling: %+v", before)
	}
	alice := st.Hasher.SID("alice")
	if f, err := lineageFacts(ctx, reg, alice, 0, 0); err != nil || f.Total != 2 || f.Unregistered != 0 || len(f.Held) != 0 {
		t.Fatalf("lineage of alice (settled or staged): %+v, %v; want 2 artifacts, none held", f, err)
	}
	if err := reg.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	after, afterRefs := readArtifact(t, reg, sum.Artifact)
	if len(after.Parents) != 1 || after.Parents[0] != before.Parents[0] || after.Lineage != 2 || !slices.Equal(afterRefs, beforeRefs) {
		t.Fatalf("summary after settling: %+v, before %+v", after, before)
	}
	kids, err := reg.Children(ctx, rec.Artifact)
	if err != nil || len(kids) != 1 || kids[0] != sum.Artifact {
		t.Fatalf("children of the record: %v, %v", kids, err)
	}
	deps, err := reg.SubjectArtifacts(ctx, alice)
	if err != nil || len(deps) != 2 {
		t.Fatalf("artifacts of alice: %+v, %v", deps, err)
	}
	for _, d := range deps {
		own := d.ID == rec.Artifact // the record is alice's own; the summary carries bob too
		if d.Direct != own || (d.Others == 0) != own {
			t.Fatalf("artifact of alice: %+v", d)
		}
	}
	parents, err := reg.ParentsOf(ctx, []shredd.ID{rec.Artifact, sum.Artifact, {}})
	if err != nil || len(parents) != 2 || len(parents[sum.Artifact]) != 2 {
		t.Fatalf("lineages of the parents: %v, %v", parents, err)
	}
	if f, err := lineageFacts(ctx, reg, alice, 0, 0); err != nil || f.Total != 2 {
		t.Fatalf("lineage of alice after settling: %+v, %v; want 2", f, err)
	}
	if err := reg.Settle(ctx); err != nil { // nothing staged: one read
		t.Fatal(err)
	}
}

// A lease is durable when issued, only its holder releases it, and a
// second release keeps the first time.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	st, clock := leaseStack(t)
	reg := st.Registry
	a := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "record")
	ref := liveRef(t, st, "alice")
	unlock := reg.RLockSubjects([]envelope.SID{ref.SID})
	l, err := reg.IssueLease(ctx, a.Artifact, shredd.Reader{Holder: "worker"}, []envelope.Ref{ref})
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	if l.Holder != "worker" || l.Artifact != a.Artifact || !l.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("lease: %+v", l)
	}
	got, err := reg.GetLease(ctx, l.ID)
	if err != nil || got.ID != l.ID || !got.ReleasedAt.IsZero() {
		t.Fatalf("get lease: %+v, %v", got, err)
	}
	f, err := lineageFacts(ctx, reg, ref.SID, clock.Now().Add(time.Second).UnixNano(), clock.Now().UnixNano())
	if err != nil || len(f.Leases) != 1 || f.Leases[0].ID != l.ID || f.Leases[0].Holder != "worker" || f.Leases[0].ExpiresAt != l.ExpiresAt.UnixNano() || f.Total != 1 {
		t.Fatalf("live leases: %+v, %v", f, err)
	}
	if _, err := reg.ReleaseLease(ctx, l.ID, "other"); !errors.Is(err, shredd.ErrForbidden) {
		t.Fatalf("release by another holder: %v, want ErrForbidden", err)
	}
	clock.Add(time.Second)
	rel, err := reg.ReleaseLease(ctx, l.ID, "worker")
	if err != nil || !rel.ReleasedAt.Equal(clock.Now()) {
		t.Fatalf("release: %+v, %v", rel, err)
	}
	clock.Add(time.Second)
	if again, err := reg.ReleaseLease(ctx, l.ID, ""); err != nil || !again.ReleasedAt.Equal(rel.ReleasedAt) {
		t.Fatalf("second release: %+v, %v; want the first time kept", again, err)
	}
	if f, err := lineageFacts(ctx, reg, ref.SID, clock.Now().UnixNano(), clock.Now().UnixNano()); err != nil || len(f.Leases) != 0 {
		t.Fatalf("live leases after release: %+v, %v", f.Leases, err)
	}
	if _, err := reg.GetLease(ctx, shredd.ID{1}); !errors.Is(err, shredd.ErrNotFound) {
		t.Fatalf("unknown lease: %v, want ErrNotFound", err)
	}
}

// A bulk import registers whole lineages in one transaction, and refuses
// an unknown kind, a malformed lineage and a forgotten subject.
func TestBulkImport(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	reg := st.Registry
	alice, bob := liveRef(t, st, "alice"), liveRef(t, st, "bob")
	rec := registry.BulkArtifact{ID: shredd.ID{1}, Kind: "episodic", Sealed: true, Lineage: []envelope.Ref{alice}, Direct: []bool{true}}
	emb := registry.BulkArtifact{ID: shredd.ID{2}, Kind: "embedding", Holder: "ann-index", Parents: []shredd.ID{rec.ID},
		Lineage: []envelope.Ref{alice, bob}, Direct: []bool{false, true}}
	if err := reg.BulkImport(ctx, []registry.BulkArtifact{rec, emb}, storage.BulkOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := reg.CountArtifacts(ctx); err != nil || n != 2 {
		t.Fatalf("count: %d, %v; want 2", n, err)
	}
	got, err := reg.GetArtifact(ctx, emb.ID)
	if err != nil || got.Holder != "ann-index" || got.Sealed || len(got.Parents) != 1 || got.Lineage != 2 {
		t.Fatalf("imported embedding: %+v, %v", got, err)
	}
	held, err := reg.HeldBy(ctx, alice.SID, "")
	if err != nil || len(held["ann-index"]) != 1 || held["ann-index"][0] != emb.ID {
		t.Fatalf("held of alice: %v, %v", held, err)
	}
	if h, err := reg.ArtifactHolder(ctx, emb.ID); err != nil || h != "ann-index" {
		t.Fatalf("holder: %q, %v", h, err)
	}
	bad := []struct {
		name string
		art  registry.BulkArtifact
		want error
	}{
		{"unknown kind", registry.BulkArtifact{ID: shredd.ID{3}, Kind: "notes", Lineage: []envelope.Ref{alice}, Direct: []bool{true}}, shredd.ErrUnknownKind},
		{"lineage and direct differ", registry.BulkArtifact{ID: shredd.ID{3}, Kind: "episodic", Lineage: []envelope.Ref{alice}}, shredd.ErrInvalid},
		{"no lineage", registry.BulkArtifact{ID: shredd.ID{3}, Kind: "episodic"}, shredd.ErrInvalid},
	}
	for _, c := range bad {
		if err := reg.BulkImport(ctx, []registry.BulkArtifact{c.art}, storage.BulkOptions{}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := st.Eraser.Forget(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	late := registry.BulkArtifact{ID: shredd.ID{4}, Kind: "episodic", Lineage: []envelope.Ref{bob}, Direct: []bool{true}}
	if err := reg.BulkImport(ctx, []registry.BulkArtifact{late}, storage.BulkOptions{}); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("import of a forgotten subject: %v, want ErrShredded", err)
	}
	if n, err := reg.CountArtifacts(ctx); err != nil || n != 2 {
		t.Fatalf("count after the refusals: %d, %v; want 2", n, err)
	}
}

// The group commit refuses an unknown kind for its item alone, and a
// closed registry queues nothing.
func TestQueue(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	reg := st.Registry
	alice := liveRef(t, st, "alice")
	direct := map[envelope.SID]bool{alice.SID: true}
	mk := func(id byte, kind string) registry.Registration {
		return registry.Registration{ID: shredd.ID{id}, Kind: kind, Sealed: true, Lineage: []envelope.Ref{alice}, Direct: direct, At: time.Now()}
	}
	unlock := reg.RLockSubjects([]envelope.SID{alice.SID})
	good, err := reg.Queue(ctx, mk(1, "episodic"))
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := reg.Queue(ctx, mk(2, "notes"))
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Wait(); err != nil {
		t.Fatalf("registration: %v", err)
	}
	if err := unknown.Wait(); !errors.Is(err, shredd.ErrUnknownKind) {
		t.Fatalf("registration of an unknown kind: %v, want ErrUnknownKind", err)
	}
	unlock()
	if ok, err := reg.Registered(ctx, shredd.ID{1}); err != nil || !ok {
		t.Fatalf("registered: %v, %v", ok, err)
	}
	if ok, err := reg.Registered(ctx, shredd.ID{2}); err != nil || ok {
		t.Fatalf("refused registration registered: %v, %v", ok, err)
	}
	reg.Close()
	reg.Close()
	if _, err := reg.Queue(ctx, mk(3, "episodic")); !errors.Is(err, shredd.ErrUnavailable) {
		t.Fatalf("queue after Close: %v, want ErrUnavailable", err)
	}
}

// PutKind reports a new kind once and updates the description after.
func TestKinds(t *testing.T) {
	ctx := context.Background()
	reg := shreddtest.New(t, shreddtest.Options{}).Registry
	if _, isNew, err := reg.PutKind(ctx, "notes", "first"); err != nil || !isNew {
		t.Fatalf("put: new %v, %v", isNew, err)
	}
	k, isNew, err := reg.PutKind(ctx, "notes", "second")
	if err != nil || isNew || k.Description != "second" {
		t.Fatalf("put again: %+v, new %v, %v", k, isNew, err)
	}
	if _, _, err := reg.PutKind(ctx, "Not A Kind!", ""); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("malformed kind: %v, want ErrInvalid", err)
	}
	if ok, err := reg.KindRegistered(ctx, "notes"); err != nil || !ok {
		t.Fatalf("registered: %v, %v", ok, err)
	}
	if ok, err := reg.KindRegistered(ctx, "other"); err != nil || ok {
		t.Fatalf("unregistered: %v, %v", ok, err)
	}
	ks, err := reg.Kinds(ctx)
	if err != nil || len(ks) != 1 || ks[0].Name != "notes" {
		t.Fatalf("kinds: %+v, %v", ks, err)
	}
}

// A forget's write lock on a subject waits for the registrations that hold
// its read lock, and leaves other subjects alone.
func TestBarrier(t *testing.T) {
	reg := shreddtest.New(t, shreddtest.Options{}).Registry
	h, err := registry.NewHasher([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	a, b := h.SID("alice"), h.SID("bob")
	for a[0] == b[0] && a[1] == b[1] { // another stripe
		b = h.SID(string(b[:4]) + "x")
	}
	unlock := reg.RLockSubjects([]envelope.SID{a, a})
	locked := make(chan func())
	go func() { locked <- reg.LockSubject(a) }()
	select {
	case <-locked:
		t.Fatal("the write lock was taken under a read lock")
	case <-time.After(50 * time.Millisecond):
	}
	reg.LockSubject(b)()
	unlock()
	(<-locked)()
}

// The hasher is keyed, the salts open only for their subject and forget,
// and malformed subject ids are refused.
func TestHasherAndSubjects(t *testing.T) {
	if _, err := registry.NewHasher(make([]byte, 31)); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("short secret: %v, want ErrInvalid", err)
	}
	h1, _ := registry.NewHasher([]byte(strings.Repeat("a", 32)))
	h2, _ := registry.NewHasher([]byte(strings.Repeat("b", 32)))
	h1again, _ := registry.NewHasher([]byte(strings.Repeat("a", 32)))
	if h1.SID("alice") != h1again.SID("alice") || h1.SID("alice") == h1.SID("bob") || h1.SID("alice") == h2.SID("alice") {
		t.Fatal("sids: not a keyed hash")
	}
	sealed := h1.SealSalt("alice", []byte("forget-1"), []byte("salt"))
	if salt, err := h1.OpenSalt("alice", []byte("forget-1"), sealed); err != nil || string(salt) != "salt" {
		t.Fatalf("open salt: %q, %v", salt, err)
	}
	if _, err := h1.OpenSalt("bob", []byte("forget-1"), sealed); err == nil {
		t.Fatal("salt opened for another subject")
	}
	if _, err := h1.OpenSalt("alice", []byte("forget-2"), sealed); err == nil {
		t.Fatal("salt opened for another forget")
	}
	for _, s := range []string{"", strings.Repeat("x", registry.MaxSubjectID+1), "\xff"} {
		if err := registry.CheckSubject(s); !errors.Is(err, shredd.ErrInvalid) {
			t.Errorf("subject %q: %v, want ErrInvalid", s, err)
		}
	}
	if err := registry.CheckSubject("alice"); err != nil {
		t.Fatal(err)
	}
}

// lineageFacts reads one subject's LineageFacts.
func lineageFacts(ctx context.Context, reg *registry.Registry, sid envelope.SID, issuedBefore, now int64) (registry.LineageFacts, error) {
	fs, err := reg.LineageFactsOf(ctx, []envelope.SID{sid}, []int64{issuedBefore}, now)
	if err != nil {
		return registry.LineageFacts{}, err
	}
	return fs[0], nil
}

// The facts of several subjects read in one statement are each subject's
// own: its count, its held artifacts by holder, its unregistered kinds,
// and the live leases on its lineage issued before its own time (a lease
// on an artifact of two of them counts for both); a subject without a
// lineage has none.
func TestLineageFactsOfMany(t *testing.T) {
	ctx := context.Background()
	st, clock := leaseStack(t)
	reg := st.Registry
	rec := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "record")
	sum := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "summary", Subjects: []string{"alice", "bob"}}, "summary")
	emb, err := st.Sealer.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := st.Sealer.Register(ctx, shredd.Source{Kind: "summary", Subjects: []string{"bob"}, Holder: "cache-2"})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob, carol := liveRef(t, st, "alice"), liveRef(t, st, "bob"), st.Hasher.SID("carol")
	unlock := reg.RLockSubjects([]envelope.SID{alice.SID, bob.SID})
	l, err := reg.IssueLease(ctx, sum.Artifact, shredd.Reader{Holder: "worker"}, []envelope.Ref{alice, bob})
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UnixNano()
	fs, err := reg.LineageFactsOf(ctx, []envelope.SID{alice.SID, bob.SID, carol}, []int64{now + 1, now, now + 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := fs[0], fs[1], fs[2]
	if a.Total != 3 || len(a.Held) != 1 || len(a.Held["ann-1"]) != 1 || a.Held["ann-1"][0] != emb.ID || a.Unregistered != 0 {
		t.Fatalf("alice: %+v; want 3 artifacts, the embedding held by ann-1", a)
	}
	if len(a.Leases) != 1 || a.Leases[0].ID != l.ID || a.Leases[0].Holder != "worker" {
		t.Fatalf("alice's leases: %+v; want the summary's", a.Leases)
	}
	if b.Total != 2 || len(b.Held) != 1 || len(b.Held["cache-2"]) != 1 || b.Held["cache-2"][0] != kv.ID {
		t.Fatalf("bob: %+v; want 2 artifacts, the cache entry held by cache-2", b)
	}
	if len(b.Leases) != 0 {
		t.Fatalf("bob's leases: %+v; the lease was issued at bob's time, not before", b.Leases)
	}
	if c.Total != 0 || len(c.Held) != 0 || len(c.Leases) != 0 {
		t.Fatalf("carol: %+v; want nothing", c)
	}
}

// A group of leases, some of whose lineages a forget reached outside this
// registry's barrier locks (as another node's forget does on a shared
// database): on a shared database each lease is checked live in the
// group's transaction and gets its own answer, refused or granted, and
// only the granted ones are written. On SQLite, one process, the barrier
// locks are the check: such a forget is not one it can meet, and every
// lease is granted.
func TestLeaseGroupOutcomes(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	reg := st.Registry
	a := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice's")
	b := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "summary", Subjects: []string{"alice", "bob"}}, "both")
	c := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "bob's")
	alice, bob := liveRef(t, st, "alice"), liveRef(t, st, "bob")
	tx, err := st.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Keys.ForgetTx(ctx, tx, alice.SID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	type ask struct {
		art  shredd.ID
		refs []envelope.Ref
		dead bool // a lineage subject forgotten
	}
	asks := []ask{{a.Artifact, []envelope.Ref{alice}, true}, {b.Artifact, []envelope.Ref{bob, alice}, true}, {c.Artifact, []envelope.Ref{bob}, false}}
	const n = 96
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := asks[i%len(asks)]
			unlock := reg.RLockSubjects([]envelope.SID{bob.SID})
			defer unlock()
			_, errs[i] = reg.IssueLease(ctx, k.art, shredd.Reader{Holder: "worker"}, k.refs)
		}()
	}
	wg.Wait()
	granted := 0
	for i, err := range errs {
		refuse := asks[i%len(asks)].dead && st.DB.Shared()
		switch {
		case refuse && !errors.Is(err, shredd.ErrShredded):
			t.Errorf("lease %d (a forgotten subject in its lineage): %v, want ErrShredded", i, err)
		case !refuse && err != nil:
			t.Errorf("lease %d: %v, want granted", i, err)
		case err == nil:
			granted++
		}
	}
	var rows int
	if err := st.DB.QueryRowContext(ctx, `SELECT count(*) FROM leases`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != granted {
		t.Fatalf("%d lease rows for %d leases granted", rows, granted)
	}
	if st.DB.Shared() && granted != n/3 {
		t.Fatalf("%d leases granted, want %d (bob's record only)", granted, n/3)
	}
}

// HeldIn lists the plaintext-held artifacts of several subjects' settled
// lineages whose holders fall in a range, each with its subject (an
// artifact of two subjects once for each); Unregistered names no subject
// whose artifacts all have registered kinds (the kinds' foreign key keeps
// it so). More subjects than one statement takes are read in chunks.
func TestHeldInAndUnregistered(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	reg := st.Registry
	rec := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "record")
	emb, err := st.Sealer.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"})
	if err != nil {
		t.Fatal(err)
	}
	both, err := st.Sealer.Register(ctx, shredd.Source{Kind: "summary", Subjects: []string{"alice", "bob"}, Holder: "cache-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sealer.Register(ctx, shredd.Source{Kind: "summary", Subjects: []string{"bob"}, Holder: "zed"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	alice, bob := st.Hasher.SID("alice"), st.Hasher.SID("bob")
	sids := []envelope.SID{alice}
	for i := range 300 { // past one statement's subjects, bob last and twice
		sids = append(sids, st.Hasher.SID(strings.Repeat("x", i+1)))
	}
	sids = append(sids, bob, bob)
	held, err := reg.HeldIn(ctx, sids, "a", "d")
	if err != nil {
		t.Fatal(err)
	}
	got := map[registry.Held]bool{}
	for _, h := range held {
		got[h] = true
	}
	want := []registry.Held{{SID: alice, ID: emb.ID, Holder: "ann-1"}, {SID: alice, ID: both.ID, Holder: "cache-2"}, {SID: bob, ID: both.ID, Holder: "cache-2"}}
	if len(held) != len(want) || len(got) != len(want) {
		t.Fatalf("held in a..d: %+v; want %+v", held, want)
	}
	for _, w := range want {
		if !got[w] {
			t.Fatalf("held in a..d: %+v; want %+v", held, want)
		}
	}
	unreg, err := reg.Unregistered(ctx, sids)
	if err != nil || len(unreg) != 0 {
		t.Fatalf("unregistered: %v, %v; want none", unreg, err)
	}
}
