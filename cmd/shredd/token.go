package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/cmd/shredd/node"
)

// tokenCmd runs `shredd token create|list|revoke`, working on the data
// directory's database directly (also while the server runs: revocations
// reach it within two seconds).
func tokenCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, tokenUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fl := flag.NewFlagSet("shredd token "+sub, flag.ContinueOnError)
	fl.SetOutput(stderr)
	def := "./shredd-data"
	if v := getenv("SHREDD_DATA_DIR"); v != "" {
		def = v
	}
	dataDir := fl.String("data-dir", def, "data directory")
	store := fl.String("store", getenv("SHREDD_STORE"), "the database, as shredd serve --store: empty for SQLite in the data directory, or a postgres:// URL")
	var name, scopes, holder, reads string
	var ttl time.Duration
	var asJSON bool
	switch sub {
	case "create":
		fl.StringVar(&name, "name", "", "a name for the token (required)")
		fl.StringVar(&scopes, "scopes", "", "comma-separated scopes: "+strings.Join(access.AllScopes, ","))
		fl.StringVar(&holder, "holder", "", "bind the token to this holder id: it can act only as that holder")
		fl.DurationVar(&ttl, "ttl", 0, "expiry after creation (0: none)")
		fl.StringVar(&reads, "reads", access.ReadsRefuse, "a write while the token holds reads it does not declare: refuse (409 undeclared_derivation) or inherit (their lineage)")
	case "list":
		fl.BoolVar(&asJSON, "json", false, "print JSON")
	case "revoke":
	default:
		fmt.Fprintf(stderr, "shredd token: unknown subcommand %q\n%s\n", sub, tokenUsage)
		return 2
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	db, err := node.OpenDB(ctx, *dataDir, *store)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "shredd token: no database at %s: start shredd once with this --data-dir first\n", filepath.Join(*dataDir, node.DBFile))
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "shredd token:", err)
		return 1
	}
	defer db.Close()
	tokens, err := access.OpenTokens(ctx, db, nil)
	if err != nil {
		fmt.Fprintln(stderr, "shredd token:", err)
		return 1
	}
	switch sub {
	case "create":
		if fl.NArg() != 0 {
			fmt.Fprintln(stderr, "shredd token create: unexpected arguments")
			return 2
		}
		if reads != access.ReadsRefuse && reads != access.ReadsInherit {
			fmt.Fprintf(stderr, "shredd token create: --reads %q: want %s or %s\n", reads, access.ReadsRefuse, access.ReadsInherit)
			return 2
		}
		var sc []string
		for _, x := range strings.Split(scopes, ",") {
			if x = strings.TrimSpace(x); x != "" {
				sc = append(sc, x)
			}
		}
		t, raw, err := tokens.Create(ctx, name, sc, holder, ttl)
		if err == nil && reads == access.ReadsInherit {
			// Created with the default (refuse) first: a crash in between
			// leaves the stricter token, whose secret nobody has seen.
			err = tokens.SetReads(ctx, t.ID, reads)
		}
		if err != nil {
			fmt.Fprintln(stderr, "shredd token create:", err)
			return 1
		}
		// The secret goes to stdout, once; the record to stderr.
		fmt.Fprintln(stdout, raw)
		fmt.Fprintf(stderr, "created token %s (%s) with scopes %s%s; the secret above is shown only once\n",
			t.ID, t.Name, strings.Join(t.Scopes, ","), map[bool]string{true: ", holder " + t.Holder, false: ""}[t.Holder != ""]+", reads "+reads)
	case "list":
		ts, err := tokens.List(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "shredd token list:", err)
			return 1
		}
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(ts)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tHOLDER\tREADS\tCREATED\tEXPIRES\tREVOKED")
		for _, t := range ts {
			reads := t.Reads
			if reads == "" {
				reads = access.ReadsRefuse // the default
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Scopes, ","), dash(t.Holder), reads,
				t.CreatedAt.Format(time.RFC3339), when(t.ExpiresAt), when(t.RevokedAt))
		}
		tw.Flush()
	case "revoke":
		if fl.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: shredd token revoke [--data-dir DIR] ID")
			return 2
		}
		if err := tokens.Revoke(ctx, fl.Arg(0)); err != nil {
			fmt.Fprintln(stderr, "shredd token revoke:", err)
			return 1
		}
		fmt.Fprintf(stderr, "revoked token %s\n", fl.Arg(0))
	}
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

const tokenUsage = `usage: shredd token create --name NAME --scopes S1,S2 [--holder ID] [--ttl 720h] [--reads refuse|inherit] [--data-dir DIR]
       shredd token list [--json] [--data-dir DIR]
       shredd token revoke [--data-dir DIR] ID`
