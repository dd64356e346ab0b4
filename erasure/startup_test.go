package erasure_test

import (
	"context"
	"testing"

	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestHasForgets: a new database holds no forget; once a subject is
// forgotten, it holds one.
func TestHasForgets(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	if has, err := erasure.HasForgets(ctx, st.DB); err != nil || has {
		t.Fatalf("a new database: %v, %v; want no forget", has, err)
	}
	if _, err := st.Service.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if has, err := erasure.HasForgets(ctx, st.DB); err != nil || !has {
		t.Fatalf("after a forget: %v, %v; want one", has, err)
	}
}
