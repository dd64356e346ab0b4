package derivation

import (
	"context"
	"fmt"
	"strings"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// The write path: a registration's graph rows are written in the caller's
// transaction, with its artifact rows, so that an artifact has graph rows
// exactly when it is registered.

// StagedSharedSQL is the part of a shared database's (PostgreSQL's) one
// statement of a group of registrations that writes the group's parent and
// lineage rows and its read links, from one array per column ($6 to $14:
// StagedSharedArgs),
// after the caller's common table expression that writes the artifacts
// ($1 to $5): "WITH a AS (...), " + StagedSharedSQL. One statement for the
// group is one round trip whatever its size, and one statement text, which
// the driver prepares once per connection. Its inserts see nothing of the
// artifacts' (a statement's parts share one snapshot), and need not: the
// staging tables have no foreign key.
const StagedSharedSQL = `p AS (
	INSERT INTO parents_staged(artifact, parent)
	SELECT * FROM unnest($6::bytea[], $7::bytea[])
), r AS (
	INSERT INTO read_links(lease, artifact, how)
	SELECT * FROM unnest($12::bytea[], $13::bytea[], $14::text[])
)
INSERT INTO lineage_staged(artifact, sid, gen, direct)
SELECT * FROM unnest($8::bytea[], $9::bytea[], $10::bigint[], $11::boolean[])`

// StagedSharedArgs returns the arguments $6 to $14 of StagedSharedSQL for
// rows. A column without rows (no parents) is nil, sent as NULL: unnest of
// it is no row.
func StagedSharedArgs(rows []Row) []any {
	var (
		pArt, pPar [][]byte
		lArt, lSID [][]byte
		lGen       []int64
		lDirect    []bool
		rLease     [][]byte
		rArt       [][]byte
		rHow       []string
	)
	for _, r := range rows {
		for _, par := range r.Parents {
			pArt, pPar = append(pArt, r.ID[:]), append(pPar, par[:])
		}
		for _, ref := range r.Lineage {
			lArt, lSID = append(lArt, r.ID[:]), append(lSID, ref.SID[:])
			lGen, lDirect = append(lGen, int64(ref.Gen)), append(lDirect, r.Direct[ref.SID])
		}
		for _, rd := range r.Reads {
			rLease, rArt, rHow = append(rLease, rd.Lease[:]), append(rArt, r.ID[:]), append(rHow, rd.How)
		}
	}
	return []any{pArt, pPar, lArt, lSID, lGen, lDirect, rLease, rArt, rHow}
}

// FoldRowsPerInsert is the rows of a statement of Stage for the fold of
// the registration WAL: a fold writes thousands of rows, and one statement
// of many rows, prepared once, costs less than one statement's call per
// row.
const FoldRowsPerInsert = 64

// Stage writes the parent and lineage rows of rows, and their read links, into the staging tables
// (Settle) in tx, on SQLite (a shared database writes a group in one
// statement: StagedSharedSQL), at most per rows a statement: the rows left
// after the last full statement take one each (a single-row statement
// prepared once, where a statement of their number would be planned for
// them alone). A group commit passes 1: in process, one prepared
// single-row statement per table costs less than planning a statement per
// group (each connection keeps its prepared statements:
// storage/sqlite.StmtCache).
func Stage(ctx context.Context, tx *storage.Tx, rows []Row, per int) error {
	var lineage, parents []any
	for _, r := range rows {
		for _, par := range r.Parents {
			parents = append(parents, r.ID[:], par[:])
		}
		for _, ref := range r.Lineage {
			lineage = append(lineage, r.ID[:], ref.SID[:], ref.Gen, r.Direct[ref.SID])
		}
	}
	if err := insertRows(ctx, tx, `INSERT INTO parents_staged(artifact, parent) VALUES `, 2, per, parents); err != nil {
		return err
	}
	if err := insertReads(ctx, tx, rows); err != nil {
		return err
	}
	return insertRows(ctx, tx, `INSERT INTO lineage_staged(artifact, sid, gen, direct) VALUES `, 4, per, lineage)
}

// insertRows runs prefix with args as rows of cols values, per rows a
// statement (Stage).
func insertRows(ctx context.Context, tx *storage.Tx, prefix string, cols, per int, args []any) error {
	for len(args) > 0 {
		n := min(len(args)/cols, per)
		if n < per {
			n = 1
		}
		if _, err := tx.ExecContext(ctx, valuesSQL(prefix, cols, n), args[:n*cols]...); err != nil {
			return fmt.Errorf("derivation: record: %w", err)
		}
		args = args[n*cols:]
	}
	return nil
}

// valuesSQL returns prefix followed by n rows of cols placeholders.
func valuesSQL(prefix string, cols, n int) string {
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	var b strings.Builder
	b.Grow(len(prefix) + n*(len(row)+2))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// Insert writes the parent and lineage rows of artifact id of a bulk
// import in tx, straight into artifact_parents and lineage (nothing to
// settle); direct says which lineage subjects are its own.
func Insert(ctx context.Context, tx *storage.Tx, id shredd.ID, parents []shredd.ID, refs []envelope.Ref, direct func(envelope.SID) bool) error {
	for _, par := range parents {
		if _, err := tx.ExecContext(ctx, `INSERT INTO artifact_parents(artifact, parent) VALUES (?, ?)`, id[:], par[:]); err != nil {
			return fmt.Errorf("derivation: record: %w", err)
		}
	}
	for _, ref := range refs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO lineage(artifact, sid, gen, direct) VALUES (?, ?, ?, ?)`,
			id[:], ref.SID[:], ref.Gen, direct(ref.SID)); err != nil {
			return fmt.Errorf("derivation: record: %w", err)
		}
	}
	return nil
}
