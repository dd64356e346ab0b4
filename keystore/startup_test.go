package keystore_test

import (
	"context"
	"testing"

	"github.com/shredd/shredd/keystore"
)

// TestHasSubjects: a new database holds no subject; once a key is made,
// it holds one.
func TestHasSubjects(t *testing.T) {
	ctx := context.Background()
	s, db := openTree(t, t.TempDir(), 8)
	if has, err := keystore.HasSubjects(ctx, db); err != nil || has {
		t.Fatalf("a new database: %v, %v; want no subject", has, err)
	}
	if _, err := s.Key(ctx, sid("alice")); err != nil {
		t.Fatal(err)
	}
	if has, err := keystore.HasSubjects(ctx, db); err != nil || !has {
		t.Fatalf("after a key was made: %v, %v; want a subject", has, err)
	}
}
