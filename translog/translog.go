// Package translog is shredd's transparency log: an append-only Merkle
// tree of opaque entries (the signed attestations and lifecycle events of
// shredd), kept in tables of shredd's database (package storage) and appended in the
// same transaction as the state change each entry records.
//
// It implements
//
//   - the RFC 6962 §2.1 Merkle tree, with its audit paths (§2.1.1) and
//     consistency proofs (§2.1.2), on top of golang.org/x/mod/sumdb/tlog;
//   - C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint) signed as a
//     C2SP signed-note (https://c2sp.org/signed-note) with Ed25519 through
//     golang.org/x/mod/sumdb/note;
//   - C2SP tlog-tiles (https://c2sp.org/tlog-tiles) hash tiles and entry
//     bundles, served by [Log.ReadTile];
//   - C2SP tlog-proof (https://c2sp.org/tlog-proof), the
//     c2sp.org/tlog-proof@v1 offline inclusion proof, made by [Log.Prove]
//     and checked by [CheckProof];
//   - a small text form for consistency proofs, [ConsistencyProof],
//     checked by [CheckConsistency].
//
// The verification half ([OpenCheckpoint], [CheckProof],
// [CheckConsistency]) needs no database: it is what `shredd verify` runs
// on a regulator's machine.
package translog

import (
	"errors"
)

// Errors returned (wrapped) by this package; test for them with errors.Is.
var (
	// ErrTooLarge reports an entry larger than MaxEntrySize, or empty.
	ErrTooLarge = errors.New("entry empty or larger than 65535 bytes")
	// ErrNotFound reports an index, tile or tree size beyond the tree.
	ErrNotFound = errors.New("not in the log")
	// ErrFormat reports an unparsable proof, checkpoint or tile path.
	ErrFormat = errors.New("malformed")
	// ErrVerify reports a signature, inclusion or consistency check
	// that failed.
	ErrVerify = errors.New("verification failed")
	// ErrOrigin reports a database that holds the log of another origin
	// than the signer's name given to Open.
	ErrOrigin = errors.New("log origin mismatch")
)

// MaxEntrySize is the largest entry the log accepts, in bytes: tlog-tiles
// entry bundles prefix each entry with a 16-bit length.
const MaxEntrySize = 65535
