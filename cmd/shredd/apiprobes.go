package main

import (
	"context"
	"time"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/keystore"
)

// apiProbes returns the node's root store and key tree's statistics as package api asks
// them: for the health routes (api.RootProbe) and for GET /metrics
// (api.KeyStats).
func apiProbes(n *node.Node) (api.RootProbe, api.KeyStats) {
	root, keys := n.Root, keystore.NewStats(n.Keys)
	probe := rootProbe{kind: root.Kind, latest: func(ctx context.Context) (int, error) {
		v, err := root.Versions(ctx)
		return v.Latest, err
	}}
	stats := keyStats{cache: keys.Cache, rootErrors: keys.RootErrors, epochs: func() (uint64, uint64, time.Duration) {
		e := keys.Epochs()
		return e.Completed, e.Failed, e.Last
	}}
	return probe, stats
}

// rootProbe is an api.RootProbe made of the root store's methods.
type rootProbe struct {
	kind   func() string
	latest func(context.Context) (int, error)
}

func (p rootProbe) Kind() string                                   { return p.kind() }
func (p rootProbe) LatestVersion(ctx context.Context) (int, error) { return p.latest(ctx) }

// keyStats is an api.KeyStats made of the key tree's methods.
type keyStats struct {
	cache      func() (hits, misses uint64)
	epochs     func() (completed, failed uint64, last time.Duration)
	rootErrors func() map[string]uint64
}

func (k keyStats) CacheStats() (hits, misses uint64)                           { return k.cache() }
func (k keyStats) EpochCounts() (completed, failed uint64, last time.Duration) { return k.epochs() }
func (k keyStats) RootErrors() map[string]uint64                               { return k.rootErrors() }
