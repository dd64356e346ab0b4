package client_test

import (
	"context"

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

// stackRoot is the root store of st as the health routes ask it, as
// cmd/shredd wires it.
func stackRoot(st *shreddtest.Stack) api.RootProbe {
	root := st.Root
	return rootProbe{kind: root.Kind, latest: func(ctx context.Context) (int, error) {
		v, err := root.Versions(ctx)
		return v.Latest, err
	}}
}
