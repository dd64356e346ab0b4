// Package roottest is the conformance suite every keystore.RootStore
// implementation must pass: the local file store and the Vault Transit store
// run the same tests. It is imported by tests only.
package roottest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
)

// Factory makes a fresh, empty root store for one test. Reopen, when not nil,
// returns a new handle on the same persisted store, to check durability.
type Factory func(t *testing.T) (store keystore.RootStore, reopen func() keystore.RootStore)

func keys(t *testing.T, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 32)
		if _, err := rand.Read(out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func blobs(ws []keystore.Wrapped) [][]byte {
	out := make([][]byte, len(ws))
	for i, w := range ws {
		out[i] = w.Blob
	}
	return out
}

func equalKeys(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("key %d differs after unwrap", i)
		}
	}
}

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Factory)
	}{
		{"WrapUnwrapBatch", testWrapUnwrapBatch},
		{"WrapIsRandomized", testWrapIsRandomized},
		{"TamperedBlobFails", testTamperedBlobFails},
		{"RotateRewrapTrim", testRotateRewrapTrim},
		{"Durable", testDurable},
		{"Marks", testMarks},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, newStore) })
	}
}

// testWrapUnwrapBatch checks a batch of keys wraps under the latest version,
// without the plaintext in the blobs, and unwraps to the same keys.
func testWrapUnwrapBatch(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, _ := newStore(t)
	ks := keys(t, 300)
	ws, err := s.Wrap(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if w.Version != v.Latest {
			t.Fatalf("blob %d wrapped under %d, latest is %d", i, w.Version, v.Latest)
		}
		if bytes.Contains(w.Blob, ks[i]) {
			t.Fatalf("blob %d contains the plaintext key", i)
		}
	}
	got, err := s.Unwrap(ctx, blobs(ws))
	if err != nil {
		t.Fatal(err)
	}
	equalKeys(t, got, ks)
}

// testWrapIsRandomized checks two wraps of one key give different blobs.
func testWrapIsRandomized(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, _ := newStore(t)
	k := keys(t, 1)
	a, err := s.Wrap(ctx, [][]byte{k[0], k[0]})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[0].Blob, a[1].Blob) {
		t.Fatal("two wraps of one key gave the same blob")
	}
}

// testTamperedBlobFails checks a tampered blob fails with
// keystore.ErrCorrupt, and garbage fails.
func testTamperedBlobFails(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws, err := s.Wrap(ctx, keys(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), ws[0].Blob...)
	b[len(b)-3] ^= 0x01
	if _, err := s.Unwrap(ctx, [][]byte{b}); !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("tampered blob: got %v, want ErrCorrupt", err)
	}
	if _, err := s.Unwrap(ctx, [][]byte{[]byte("garbage")}); err == nil {
		t.Fatal("garbage blob unwrapped")
	}
}

// testRotateRewrapTrim checks a rotation makes a new version, a rewrap moves
// blobs to it, and a trim destroys the versions below it, for good.
func testRotateRewrapTrim(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, _ := newStore(t)
	v0, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ks := keys(t, 5)
	old, err := s.Wrap(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := s.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v0.Latest+1 {
		t.Fatalf("rotate gave %d after %d", v1, v0.Latest)
	}
	// Old blobs still open before the trim.
	got, err := s.Unwrap(ctx, blobs(old))
	if err != nil {
		t.Fatal(err)
	}
	equalKeys(t, got, ks)
	nw, err := s.Rewrap(ctx, blobs(old))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range nw {
		if w.Version != v1 {
			t.Fatalf("rewrap gave version %d, want %d", w.Version, v1)
		}
	}
	if _, err := s.Trim(ctx, v1+1); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("trim above latest: got %v, want ErrInvalid", err)
	}
	retired, err := s.Trim(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	if len(retired) == 0 || retired[len(retired)-1] != v1-1 {
		t.Fatalf("retired %v, want versions up to %d", retired, v1-1)
	}
	if _, err := s.Unwrap(ctx, blobs(old)); !errors.Is(err, keystore.ErrVersionDestroyed) {
		t.Fatalf("unwrap after trim: got %v, want ErrVersionDestroyed", err)
	}
	if _, err := s.Rewrap(ctx, blobs(old)); !errors.Is(err, keystore.ErrVersionDestroyed) {
		t.Fatalf("rewrap after trim: got %v, want ErrVersionDestroyed", err)
	}
	got, err = s.Unwrap(ctx, blobs(nw))
	if err != nil {
		t.Fatal(err)
	}
	equalKeys(t, got, ks)
	v, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Latest != v1 || v.MinAvailable != v1 {
		t.Fatalf("versions after trim = %+v, want latest=min=%d", v, v1)
	}
	again, err := s.Trim(ctx, v1)
	if err != nil || len(again) != 0 {
		t.Fatalf("second trim: retired %v, err %v; want nothing", again, err)
	}
}

// testDurable checks a rotation, a rewrap and a trim survive a reopen of the
// store.
func testDurable(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, reopen := newStore(t)
	if reopen == nil {
		t.Skip("backend has no separate handle to reopen") // every shredd backend provides one
	}
	ks := keys(t, 3)
	ws, err := s.Wrap(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := s.Rewrap(ctx, blobs(ws))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trim(ctx, v); err != nil {
		t.Fatal(err)
	}
	r := reopen()
	got, err := r.Unwrap(ctx, blobs(nw))
	if err != nil {
		t.Fatal(err)
	}
	equalKeys(t, got, ks)
	if _, err := r.Unwrap(ctx, blobs(ws)); !errors.Is(err, keystore.ErrVersionDestroyed) {
		t.Fatalf("reopened store unwrapped a trimmed version: %v", err)
	}
	rv, err := r.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rv.Latest != v || rv.MinAvailable != v {
		t.Fatalf("reopened versions %+v, want %d/%d", rv, v, v)
	}
}

// testMarks checks the marks a store keeps beside the root
// (keystore.MarkKeeper: package ledger's heads), across a rotation, a trim
// and a reopen.
func testMarks(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s, reopen := newStore(t)
	mk, ok := s.(keystore.MarkKeeper)
	if !ok {
		t.Fatalf("%T keeps no marks", s)
	}
	const stream = "forget-ledger-0123456789abcdef"
	if _, err := mk.Mark(ctx, stream); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("mark of a new store: %v, want ErrNotFound", err)
	}
	if err := mk.KeepMark(ctx, stream, []byte(`{"seq":7,"hash":"ab12"}`)); err != nil {
		t.Fatal(err)
	}
	want := `{"seq":9,"hash":"cd34"}`
	if err := mk.KeepMark(ctx, stream, []byte(want)); err != nil {
		t.Fatal(err)
	}
	if got, err := mk.Mark(ctx, stream); err != nil || string(got) != want {
		t.Fatalf("mark %s, %v; want %s", got, err, want)
	}
	// The mark lives beside the keys: a rotation and a trim keep it.
	v, err := s.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trim(ctx, v); err != nil {
		t.Fatal(err)
	}
	if reopen != nil {
		s = reopen()
	}
	if got, err := s.(keystore.MarkKeeper).Mark(ctx, stream); err != nil || string(got) != want {
		t.Fatalf("mark after a trim and a reopen: %s, %v; want %s", got, err, want)
	}
}
