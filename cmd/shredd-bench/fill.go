package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
)

// benchSubject is the subject id of the i-th subject of a benchmark data
// directory: `shredd-bench fill` creates them, `shredd-bench` uses them.
func benchSubject(i int) string { return fmt.Sprintf("bench-%d@example.test", i) }

// benchHeavySubject is the subject that `shredd-bench fill --heavy N` gives
// N artifacts, for the erasure verification benchmark.
const benchHeavySubject = "bench-heavy@example.test"

// Kinds of the artifacts of a benchmark data directory.
var benchKinds = []string{"episodic", "embedding", "summary"}

// fillConfig is a parsed `shredd-bench fill`.
type fillConfig struct {
	Dir       string
	Store     string // "": SQLite in Dir; or a postgres:// URL (node.Config.Store)
	Root      string // local or vault
	Vault     vault.Config
	Subjects  int
	Artifacts int
	Heavy     int
	Buckets   int
	Seed      uint64
	CacheMiB  int
	Chunk     int
}

func parseFill(args []string, stderr io.Writer, getenv func(string) string) (*fillConfig, error) {
	c := &fillConfig{}
	fl := flag.NewFlagSet("shredd-bench fill", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&c.Dir, "dir", "", "data directory to fill (created; no server may be using it); with --store, it holds the node's secrets only")
	fl.StringVar(&c.Store, "store", "", "the database, as shredd serve --store: a postgres:// URL (no server may be using it); default SQLite in --dir")
	// The root store of the nodes that will serve the fill: the bucket keys
	// are wrapped under it. Same flags and defaults as shredd serve.
	fl.StringVar(&c.Root, "root", "local", "root store, as shredd serve --root: local (a root key file in --dir) or vault (a Vault Transit key; a token in VAULT_TOKEN)")
	fl.StringVar(&c.Vault.Address, "vault-addr", getenv("VAULT_ADDR"), "Vault address of --root vault (VAULT_ADDR)")
	fl.StringVar(&c.Vault.Mount, "vault-transit-mount", "transit", "Transit mount path of --root vault")
	fl.StringVar(&c.Vault.Key, "vault-key", "shredd-root", "Transit key name of the root, as shredd serve --vault-key")
	fl.IntVar(&c.Subjects, "subjects", 1000, "subjects to create ("+benchSubject(0)+" ...)")
	fl.IntVar(&c.Artifacts, "artifacts", 10000, "artifacts to register: records, embeddings of records, summaries of records, aggregates over subjects")
	fl.IntVar(&c.Heavy, "heavy", 0, "artifacts of one more subject, "+benchHeavySubject+" (for the erasure verification benchmark)")
	fl.IntVar(&c.Buckets, "buckets", keystore.DefaultBuckets, "bucket keys of a new data directory")
	fl.Uint64Var(&c.Seed, "seed", 1, "seed of the artifact generator (ids stay random per run)")
	fl.IntVar(&c.CacheMiB, "cache-mib", 1024, "SQLite page cache during the import, MiB")
	fl.IntVar(&c.Chunk, "chunk", 20_000, "artifacts per import transaction (larger: fewer rewrites of the same index pages, more memory)")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if c.Dir == "" || c.Subjects < 1 || c.Artifacts < 0 || c.Heavy < 0 || c.Buckets < 1 || c.Chunk < 1 || fl.NArg() > 0 {
		fmt.Fprintln(stderr, "shredd-bench fill: needs --dir, --subjects >= 1, --artifacts >= 0, --heavy >= 0, --buckets >= 1 and no arguments")
		return nil, errors.New("bad flags")
	}
	if c.Store != "" && !node.IsPostgres(c.Store) {
		fmt.Fprintln(stderr, "shredd-bench fill: --store must be a postgres:// or postgresql:// URL")
		return nil, errors.New("bad store")
	}
	switch c.Root {
	case "local":
	case "vault":
		c.Vault.Token = getenv("VAULT_TOKEN")
		if c.Vault.Address == "" || c.Vault.Token == "" {
			fmt.Fprintln(stderr, "shredd-bench fill: --root vault needs --vault-addr (VAULT_ADDR) and VAULT_TOKEN")
			return nil, errors.New("incomplete vault config")
		}
	default:
		fmt.Fprintf(stderr, "shredd-bench fill: --root must be local or vault, not %q\n", c.Root)
		return nil, errors.New("bad root")
	}
	return c, nil
}

// fillCmd runs `shredd-bench fill`.
func fillCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c, err := parseFill(args, stderr, getenv)
	if err != nil {
		return 2
	}
	if err := c.run(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "shredd-bench fill:", err)
		return 1
	}
	return 0
}

// createSubjectKeys creates the keys of new subjects: the one place where
// the generator creates keys, through the key tree's bulk path (so that
// whatever the key tree records per created key, such as a transparency
// log entry, is recorded for these too).
func createSubjectKeys(ctx context.Context, keys *keystore.Tree, sids []envelope.SID, ids []string) error {
	return keys.BulkCreateKeys(ctx, sids, ids)
}

// run fills the data directory: the kinds, the subjects' keys, then the
// artifacts in transactions of fillChunk.
func (c *fillConfig) run(ctx context.Context, stdout io.Writer) error {
	start := time.Now()
	// The same stack as serve, with the same transparency log: every
	// created key is logged.
	n, err := node.OpenBulk(ctx, node.Config{DataDir: c.Dir, Store: c.Store, OpenRoot: c.openRoot, Buckets: c.Buckets})
	if err != nil {
		return err
	}
	defer n.Close()
	db, keys, reg, hasher := n.DB, n.Keys, n.Registry, n.Hasher
	for _, k := range benchKinds {
		if _, _, err := reg.PutKind(ctx, k, "benchmark data"); err != nil {
			return err
		}
	}

	// Keys, in chunks that bound the memory of the sid list.
	sids := make([]envelope.SID, c.Subjects)
	for i := range sids {
		sids[i] = hasher.SID(benchSubject(i))
	}
	heavy := hasher.SID(benchHeavySubject)
	const keyChunk = 100_000
	for i := 0; i < len(sids); i += keyChunk {
		end := min(i+keyChunk, len(sids))
		ids := make([]string, 0, end-i)
		for k := i; k < end; k++ {
			ids = append(ids, benchSubject(k))
		}
		if err := createSubjectKeys(ctx, keys, sids[i:end], ids); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "keys %d/%d (%s)\n", min(i+keyChunk, len(sids)), len(sids), time.Since(start).Round(time.Second))
	}
	if c.Heavy > 0 {
		if err := createSubjectKeys(ctx, keys, []envelope.SID{heavy}, []string{benchHeavySubject}); err != nil {
			return err
		}
	}

	g := &fillGen{sids: sids}
	total := c.Artifacts + c.Heavy
	// A directory filled before (an interrupted fill) counts: fill up to the
	// total. The heavy subject's artifacts come last.
	have, err := reg.CountArtifacts(ctx)
	if err != nil {
		return err
	}
	if have > 0 {
		fmt.Fprintf(stdout, "artifacts %d already registered\n", have)
	}
	// Artifact ids come from the generator: a resumed fill must not repeat
	// the ids of the first.
	g.rng = rand.New(rand.NewPCG(c.Seed, 0x5eed^uint64(have)))
	for done := int(have); done < total; {
		n := min(c.Chunk, total-done)
		batch := make([]registry.BulkArtifact, n)
		for i := range batch {
			if done+i < c.Artifacts {
				batch[i] = g.next()
			} else {
				batch[i] = g.heavy(heavy)
			}
		}
		// The import commits without fsync: an interrupted fill is resumed,
		// and the server that opens the directory afterwards syncs as ever.
		if err := reg.BulkImport(ctx, batch, storage.BulkOptions{CacheKiB: c.CacheMiB << 10, NoSync: true}); err != nil {
			return err
		}
		done += n
		if done%(max(c.Chunk, 200_000)) < n || done == total {
			fmt.Fprintf(stdout, "artifacts %d/%d (%s)\n", done, total, time.Since(start).Round(time.Second))
		}
	}
	// Make the whole fill durable before saying so.
	if err := db.Sync(ctx); err != nil {
		return err
	}
	where := c.Dir
	if c.Store != "" {
		where = "the --store database" // its URL may hold a password
	}
	fmt.Fprintf(stdout, "filled %s: %d subjects, %d artifacts, %d of them of %s, in %s\n", where, c.Subjects, total, c.Heavy,
		benchHeavySubject, time.Since(start).Round(time.Second))
	return nil
}

// fillGen generates a realistic lineage: half records of one subject, then
// embeddings of a recent record (its lineage), summaries of 2 to 4 recent
// records (the union of theirs) and aggregates over 5 to 20 subjects.
type fillGen struct {
	rng    *rand.Rand
	sids   []envelope.SID
	recent [4096]fillRec // a ring of recent records, the parents of derivatives
	n      int
	heavyR []shredd.ID
}

type fillRec struct {
	id  shredd.ID
	sid envelope.SID
}

func (g *fillGen) id() shredd.ID {
	var id shredd.ID
	for i := 0; i < len(id); i += 8 {
		v := g.rng.Uint64()
		for j := 0; j < 8; j++ {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	return id
}

func (g *fillGen) record(sid envelope.SID) registry.BulkArtifact {
	a := registry.BulkArtifact{ID: g.id(), Kind: "episodic", Sealed: true, Lineage: []envelope.Ref{{SID: sid, Gen: 1}}, Direct: []bool{true}}
	g.recent[g.n%len(g.recent)] = fillRec{a.ID, sid}
	g.n++
	return a
}

func (g *fillGen) next() registry.BulkArtifact {
	x := g.rng.Float64()
	if g.n == 0 || x < 0.5 {
		return g.record(g.sids[g.rng.IntN(len(g.sids))])
	}
	pick := func() fillRec { return g.recent[g.rng.IntN(min(g.n, len(g.recent)))] }
	switch {
	case x < 0.8:
		p := pick()
		return registry.BulkArtifact{ID: g.id(), Kind: "embedding", Holder: "ann-index", Sealed: false, Parents: []shredd.ID{p.id},
			Lineage: []envelope.Ref{{SID: p.sid, Gen: 1}}, Direct: []bool{false}}
	case x < 0.95:
		a := registry.BulkArtifact{ID: g.id(), Kind: "summary", Sealed: true}
		seen := map[envelope.SID]bool{}
		for range 2 + g.rng.IntN(3) {
			p := pick()
			if seen[p.sid] {
				continue
			}
			seen[p.sid] = true
			a.Parents = append(a.Parents, p.id)
			a.Lineage = append(a.Lineage, envelope.Ref{SID: p.sid, Gen: 1})
			a.Direct = append(a.Direct, false)
		}
		return a
	}
	a := registry.BulkArtifact{ID: g.id(), Kind: "summary", Sealed: true}
	seen := map[envelope.SID]bool{}
	for range 5 + g.rng.IntN(16) {
		sid := g.sids[g.rng.IntN(len(g.sids))]
		if seen[sid] {
			continue
		}
		seen[sid] = true
		a.Lineage = append(a.Lineage, envelope.Ref{SID: sid, Gen: 1})
		a.Direct = append(a.Direct, true)
	}
	return a
}

// heavy generates the artifacts of the heavy subject: records, and
// embeddings of them.
func (g *fillGen) heavy(sid envelope.SID) registry.BulkArtifact {
	if len(g.heavyR) > 0 && g.rng.IntN(2) == 0 {
		p := g.heavyR[g.rng.IntN(len(g.heavyR))]
		return registry.BulkArtifact{ID: g.id(), Kind: "embedding", Holder: "ann-index", Parents: []shredd.ID{p},
			Lineage: []envelope.Ref{{SID: sid, Gen: 1}}, Direct: []bool{false}}
	}
	a := registry.BulkArtifact{ID: g.id(), Kind: "episodic", Sealed: true, Lineage: []envelope.Ref{{SID: sid, Gen: 1}}, Direct: []bool{true}}
	g.heavyR = append(g.heavyR, a.ID)
	return a
}

// openRoot opens the root store of the fill (node.RootOpener): the local
// root file of the data directory, or the Vault Transit key that the nodes
// serving the fill share (--root vault), which must answer.
func (c *fillConfig) openRoot(ctx context.Context, dir string, _ *slog.Logger) (node.Root, error) {
	if c.Root == "vault" {
		vs, err := vault.New(c.Vault)
		if err != nil {
			return node.Root{}, err
		}
		if err := vs.Check(ctx); err != nil {
			return node.Root{}, fmt.Errorf("vault root store: %w", err)
		}
		return node.Root{Store: vs}, nil
	}
	ls, err := local.OpenBeside(filepath.Join(dir, node.RootFile), filepath.Join(dir, node.DBFile))
	if err != nil {
		return node.Root{}, err
	}
	return node.Root{Store: ls}, nil
}
