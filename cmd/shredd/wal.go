package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/registry"
)

const walUsage = `usage: shredd wal check [serve flags]         whether the database and wal/ hold every registration shredd acknowledged
       shredd wal accept-loss [serve flags]   record, with the root, that the registrations they lack are lost (the server must be stopped)
The serve flags (--data-dir, --root, --vault-*) name the data directory as shredd serve does.
accept-loss lowers the registration WAL's mark kept with the root to what the database and wal/ hold and records the lost run
there; every erasure attestation signed afterwards states it as a residual. Exit 0: whole (check) or recorded; 1: missing, or refused.`

// walCmd runs shredd wal check|accept-loss on a stopped server's data
// directory (it takes the data directory's lock).
func walCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] != "check" && args[0] != "accept-loss" {
		fmt.Fprintln(stderr, walUsage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	if helpRequested(rest) {
		fmt.Fprintln(stdout, walUsage)
		return exitOK
	}
	p, err := ParseFlags(rest, stderr, getenv)
	if err != nil {
		return exitUsage
	}
	if err := runWAL(ctx, p, sub, stdout); err != nil {
		fmt.Fprintln(stderr, "shredd wal "+sub+":", err)
		return exitFailed
	}
	return exitOK
}

func runWAL(ctx context.Context, p *Program, sub string, stdout io.Writer) error {
	dir := p.DataDir
	if p.Config.Store != "" {
		return errors.New("with --store postgres:// registrations go straight to the database: there is no registration WAL")
	}
	if err := datadir.CheckDir(dir); err != nil {
		return err
	}
	lock, err := datadir.LockFor(dir, "a running shredd: stop it first")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	secret, err := datadir.Read(filepath.Join(dir, node.SecretFile), datadir.Secret, 1<<10)
	if err != nil {
		return fmt.Errorf("subject secret (the WAL's MAC key derives from it): %w", err)
	}
	db, err := node.OpenDBReadOnly(ctx, dir, "")
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	root, err := p.openRoot(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if root.Close != nil {
		defer root.Close()
	}
	walDir, key := filepath.Join(dir, registry.WALDir), registry.WALKey(secret)
	inst, err := instanceOf(ctx, dir)
	if err != nil {
		return err
	}
	stream := registry.StreamFor(root.Store.Kind(), inst)
	err = registry.CheckWAL(ctx, db, root.Store, stream, walDir, key)
	switch {
	case err == nil:
		fmt.Fprintln(stdout, "the database and wal/ hold every registration shredd acknowledged")
		return nil
	case !errors.Is(err, registry.ErrWALBehind) && !errors.Is(err, registry.ErrMarkMissing) || sub == "check":
		return err
	}
	lost, err := registry.AcceptLoss(ctx, db, root.Store, stream, walDir, key, time.Now())
	if err != nil {
		return err
	}
	if lost.From == 0 {
		return errors.New("nothing was recorded: no acknowledged registration is missing")
	}
	fmt.Fprintf(stdout, "recorded with the root: registrations %s are lost; every erasure attestation signed from now on states it (residual lost_registrations); start shredd\n", lost)
	return nil
}
