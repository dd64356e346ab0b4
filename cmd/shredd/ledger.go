package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/ledger"
)

const ledgerUsage = `usage: shredd ledger check [serve flags]                   what of the forget ledger is damaged, and what a repair would lose
       shredd ledger repair [--accept-loss] [serve flags]   repair it (the server must be stopped)
The serve flags (--data-dir, --store, --forget-ledger, --root, --vault-*) name the data directory as shredd serve does.
A repair that would lose a forget the database lacks needs --accept-loss. Exit 0: whole (check) or repaired; 1: damaged, or refused.`

// ledgerCmd runs shredd ledger check|repair on a stopped server's data
// directory (it takes the data directory's lock).
func ledgerCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] != "check" && args[0] != "repair" {
		fmt.Fprintln(stderr, ledgerUsage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	acceptLoss := slices.ContainsFunc(rest, func(a string) bool { return a == "--accept-loss" || a == "-accept-loss" })
	rest = slices.DeleteFunc(slices.Clone(rest), func(a string) bool { return a == "--accept-loss" || a == "-accept-loss" })
	if acceptLoss && sub != "repair" {
		fmt.Fprintln(stderr, ledgerUsage)
		return exitUsage
	}
	if helpRequested(rest) {
		fmt.Fprintln(stdout, ledgerUsage)
		return exitOK
	}
	p, err := ParseFlags(rest, stderr, getenv)
	if err != nil {
		return exitUsage
	}
	c, err := checkLedger(ctx, p)
	if err != nil {
		fmt.Fprintln(stderr, "shredd ledger:", err)
		return exitFailed
	}
	fmt.Fprint(stdout, c.Report())
	if sub == "check" {
		if c.Damage() {
			return exitFailed
		}
		return exitOK
	}
	if !c.Damage() && c.DBMissing == 0 {
		fmt.Fprintln(stdout, "nothing to repair")
		return exitOK
	}
	if c.Loss() && !acceptLoss {
		fmt.Fprintln(stderr, "shredd ledger repair: the repair would lose what the verdict says; restore the ledger file (and the database taken with it) instead, or accept the loss with --accept-loss")
		return exitFailed
	}
	// The repair is the start-up's reconciliation, allowed to drop what
	// the database cannot account for: the stack opens, repairs and
	// closes, serving nothing.
	cfg := p.Config
	cfg.OpenRoot = p.openRoot
	cfg.SharedRoot = p.Root == "vault"
	cfg.LedgerAcceptLoss = acceptLoss
	cfg.Buckets = 0 // the tree's own: a repair creates none
	n, err := node.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "shredd ledger repair:", err)
		return exitFailed
	}
	n.Close()
	fmt.Fprintf(stdout, "repaired %s: the damaged bytes are kept beside it (%s.damaged-*); start shredd\n", cfg.LedgerPath(), filepath.Base(cfg.LedgerPath()))
	return exitOK
}

// checkLedger checks the data directory's ledger with its lock held,
// changing nothing.
func checkLedger(ctx context.Context, p *Program) (ledger.Check, error) {
	dir := p.DataDir
	if _, err := os.Stat(dir); err != nil {
		return ledger.Check{}, err
	}
	lock, err := datadir.LockFor(dir, "a running shredd: stop it first")
	if err != nil {
		return ledger.Check{}, err
	}
	defer lock.Unlock()
	secret, err := datadir.Read(filepath.Join(dir, node.SecretFile), datadir.Secret, 1<<10)
	if err != nil {
		return ledger.Check{}, fmt.Errorf("subject secret (the ledger's MAC key derives from it): %w", err)
	}
	// A Vault root store keeps no ledger head: it keeps the forget records
	// (erasure's records), from which a start repairs the ledger.
	var kept *ledger.Head
	var keptErr error
	if p.Root != "vault" {
		b, err := local.ReadMark(filepath.Join(dir, node.RootFile), erasure.HeadStream)
		var h ledger.Head
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &h); err != nil {
				return ledger.Check{}, fmt.Errorf("%w: the forget ledger's head kept in %s does not parse (%v): the root file was edited or damaged; put back the live root.key (never one from a backup)",
					keystore.ErrCorrupt, node.RootFile, err)
			}
			kept = &h
		case errors.Is(err, keystore.ErrCorrupt):
			return ledger.Check{}, err
		case !errors.Is(err, keystore.ErrNotFound):
			keptErr = err
		}
	}
	db, err := node.OpenDBReadOnly(ctx, dir, p.Store)
	if err != nil {
		return ledger.Check{}, err
	}
	defer db.Close()
	return erasure.CheckLedger(ctx, db, p.LedgerPath(), ledger.LinesKey(secret), kept, keptErr, p.Root == "vault")
}
