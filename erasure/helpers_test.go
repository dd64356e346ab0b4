package erasure_test

import (
	"context"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/shreddtest"
)

// newService is the whole service (the registry and the erasure on it)
// with the kinds the tests use.
func newService(t testing.TB) *erasure.Service {
	t.Helper()
	return shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic", "summary", "embedding"}}).Service
}

// seal encrypts pt for src and fails the test on an error.
func seal(t *testing.T, s *erasure.Service, src shredd.Source, pt string) shredd.Sealed {
	t.Helper()
	out, err := s.Encrypt(context.Background(), src, []byte(pt), nil)
	if err != nil {
		t.Fatalf("encrypt %s: %v", pt, err)
	}
	return out
}
