// Command shredd-bench is shredd's load tool (docs/performance.md): it
// drives a shredd server side by side with Vault Transit and a no-op
// handler, and fills data directories for benchmarks at scale.
//
//	shredd-bench [flags]                  the load tool (see shredd-bench -h)
//	shredd-bench fill --dir D ...         fill a data directory for benchmarks (no server may use it)
//	shredd-bench noop-server [--addr A]   the no-op handler the load tool compares with
//
// It is a separate command so that the server binary carries none of it
// (nor can start `vault server -dev`): with --serve-self it starts the
// shredd binary of --shredd-bin, or builds one.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
