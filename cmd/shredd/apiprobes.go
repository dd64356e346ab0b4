package main

import (
	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/keystore"
)

// apiProbes returns the node's root store and key tree's statistics as package api asks
// them: for the health routes (api.RootProbe) and for GET /metrics
// (api.KeyStats).
func apiProbes(n *node.Node) (api.RootProbe, api.KeyStats) {
	return keystore.Probe{RootStore: n.Root}, keystore.NewStats(n.Keys)
}
