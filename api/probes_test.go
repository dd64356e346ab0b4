package api_test

import (
	"context"
	"github.com/shredd/shredd/keystore"
	"time"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// rootProbe is an api.RootProbe made of a root store's methods.
type rootProbe struct {
	kind   func() string
	latest func(context.Context) (int, error)
}

func (p rootProbe) Kind() string                                   { return p.kind() }
func (p rootProbe) LatestVersion(ctx context.Context) (int, error) { return p.latest(ctx) }

// keyStats is an api.KeyStats made of a key tree's methods.
type keyStats struct {
	cache      func() (hits, misses uint64)
	epochs     func() (completed, failed uint64, last time.Duration)
	rootErrors func() map[string]uint64
}

func (k keyStats) CacheStats() (hits, misses uint64)                           { return k.cache() }
func (k keyStats) EpochCounts() (completed, failed uint64, last time.Duration) { return k.epochs() }
func (k keyStats) RootErrors() map[string]uint64                               { return k.rootErrors() }

// stackRoot is the root store of st as the health routes ask it, as
// cmd/shredd wires it.
func stackRoot(st *shreddtest.Stack) api.RootProbe {
	root := st.Root
	return rootProbe{kind: root.Kind, latest: func(ctx context.Context) (int, error) {
		v, err := root.Versions(ctx)
		return v.Latest, err
	}}
}

// stackKeys is the key tree of st as GET /metrics reads it, as cmd/shredd
// wires it.
func stackKeys(st *shreddtest.Stack) api.KeyStats {
	keys := keystore.NewStats(st.Keys)
	return keyStats{cache: keys.Cache, rootErrors: keys.RootErrors, epochs: func() (uint64, uint64, time.Duration) {
		e := keys.Epochs()
		return e.Completed, e.Failed, e.Last
	}}
}
