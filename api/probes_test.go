package api_test

import (
	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// stackRoot is the root store of st as the health routes ask it, as
// cmd/shredd wires it.
func stackRoot(st *shreddtest.Stack) api.RootProbe { return keystore.Probe{RootStore: st.Root} }

// stackKeys is the key tree of st as GET /metrics reads it, as cmd/shredd
// wires it.
func stackKeys(st *shreddtest.Stack) api.KeyStats { return keystore.NewStats(st.Keys) }
