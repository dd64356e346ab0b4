// Package derivation is shredd's derivation graph: which artifact was
// derived from which (parents), and the lineage of each artifact, the
// transitive closure of its subjects over its parents, stored flat so that
// a forget finds every artifact that depends on a subject in one index
// lookup. It answers what a forget reaches: the artifacts of a subject's
// lineage and the children of an artifact.
//
// It also keeps the reads that became lineage (reads.go): for each write,
// the decrypt leases its writer held and how the write closed each.
//
// It owns the tables artifact_parents, lineage, lineage_staged,
// parents_staged, read_links and the view lineage_all over the settled and staged
// lineage: no other package names them in SQL. A registration writes its
// graph rows into the staging tables in the caller's transaction (Stage,
// or StagedSharedSQL with StagedSharedArgs inside the caller's one
// statement on PostgreSQL); Graph.Settle moves them into the tables keyed
// by subject and by parent later. Package registry, the one package above
// it that joins the graph with its own tables (artifacts, kinds, leases) in
// one statement, takes the names of the graph's tables from here
// (Lineage, LineageAll, OthersSQL).
//
// It imports the root package, envelope and storage; it knows nothing of
// artifacts' kinds, holders or leases, nor of the registration WAL.
package derivation

import (
	"sync"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// The graph's tables, for the statements of package registry that join
// them with its artifacts in one snapshot. Their rows name the artifact
// (artifact), the subject (sid), the key generation (gen) and whether the
// subject is the artifact's own (direct).
const (
	// Lineage is the settled lineage rows, keyed by subject.
	Lineage = `lineage`
	// LineageAll is the settled and the staged lineage rows: a reader
	// of it needs no Settle first.
	LineageAll = `lineage_all`
	// OthersSQL is the number of other subjects in the settled lineage of
	// the artifact of lineage row l: above 0, a collateral aggregate.
	OthersSQL = `(SELECT count(*) - 1 FROM lineage o WHERE o.artifact = l.artifact)`
	// ReadLinks is the read links (reads.go): lease, artifact (all zero
	// for a refused write) and how the write closed the read.
	ReadLinks = `read_links`
)

// Row is the graph's rows of one artifact: its parents, its whole lineage
// at the key generations it was sealed under, and which of its lineage
// subjects are its own (Direct).
type Row struct {
	ID      shredd.ID
	Parents []shredd.ID
	Lineage []envelope.Ref
	Direct  map[envelope.SID]bool
	Reads   []shredd.Read // the writer's reads the registration was checked against (reads.go)
}

// Graph reads the derivation graph of one database and settles its
// staged rows.
type Graph struct {
	db       *storage.DB
	settleMu sync.Mutex // one Settle at a time
}

// New returns the graph of db, whose schema storage made.
func New(db *storage.DB) *Graph { return &Graph{db: db} }
