// Package keystore is shredd's key tree: a destroyable root key held by a
// RootStore, bucket keys wrapped under the root, and per-subject keys (DEKs)
// wrapped under their bucket key, kept in the database (see docs/design.md,
// "Keys").
//
// Forgetting a subject deletes its DEK and re-keys its bucket; an epoch then
// rotates the root, rewraps every bucket key under the new root version and
// destroys the old versions. After that epoch, a copy of the database taken
// before the forget can no longer open the forgotten DEK: its bucket key was
// wrapped only under root versions that no longer exist, and the live database
// holds a different bucket key.
package keystore

import (
	"context"
	"errors"

	"github.com/shredd/shredd/envelope"
)

// Errors returned by the key tree and the root stores. Implementations wrap
// them with %w and the operation; callers test with errors.Is. Invalid
// arguments (such as trimming above the latest version) wrap
// shredd.ErrInvalid.
var (
	// ErrShredded means the subject's key (or this generation of it) was
	// destroyed by a forget: the data existed and is now erased.
	ErrShredded = errors.New("subject key shredded")
	// ErrNotFound means no key exists for the subject or generation.
	ErrNotFound = errors.New("key not found")
	// ErrRootUnavailable means the root store (or the subject KMS) cannot
	// be reached or refuses to serve; callers must fail closed.
	ErrRootUnavailable = errors.New("root store unavailable")
	// ErrVersionDestroyed means a blob is wrapped under a root version that
	// has been destroyed (trimmed).
	ErrVersionDestroyed = errors.New("root key version destroyed")
	// ErrCorrupt means a wrapped key failed authentication or does not parse.
	ErrCorrupt = errors.New("wrapped key corrupt")
	// ErrReadBack means a fact a forget's state asserts (the subject key
	// deleted, the bucket re-wrapped, the root versions destroyed) was read
	// back from where it lives and found untrue: a trigger, a fault or a
	// bug. The forget stays where it is, with the reason.
	ErrReadBack = errors.New("read back disagrees")
)

// Wrapped is a key wrapped under one root key version.
type Wrapped struct {
	Version int    // root key version that wrapped Blob
	Blob    []byte // opaque to callers; each RootStore defines its own form
}

// Versions describes the root key versions a RootStore holds.
type Versions struct {
	Latest       int // the version new wraps use
	MinAvailable int // the oldest version that still exists; older ones are destroyed
}

// RootStore holds the root of the key tree. Wrapping never exposes the root
// key itself. Every method returns an error wrapping ErrRootUnavailable when
// the backend cannot be reached, so that callers fail closed.
type RootStore interface {
	// Kind names the backend, such as "local" or "vault-transit".
	Kind() string
	// Wrap wraps each key under the latest root version.
	Wrap(ctx context.Context, keys [][]byte) ([]Wrapped, error)
	// Unwrap unwraps each blob. A blob under a destroyed version gives
	// ErrVersionDestroyed; a blob that fails authentication gives ErrCorrupt.
	Unwrap(ctx context.Context, blobs [][]byte) ([][]byte, error)
	// Rewrap re-encrypts each blob under the latest version, with the same
	// errors as Unwrap.
	Rewrap(ctx context.Context, blobs [][]byte) ([]Wrapped, error)
	// Rotate creates a new latest version and returns its number.
	Rotate(ctx context.Context) (int, error)
	// Trim destroys every version below minVersion, so that blobs wrapped
	// under them can never be unwrapped again, and returns the versions it
	// destroyed. minVersion above Latest gives shredd.ErrInvalid.
	// Trimming to a version at or below MinAvailable destroys nothing.
	Trim(ctx context.Context, minVersion int) ([]int, error)
	// Versions reports the latest and the oldest available version.
	Versions(ctx context.Context) (Versions, error)
	// Describe returns the root key's description as last read from the
	// backend, for the key evidence of attestations; it makes no call, so
	// a caller that needs the root store's state now (another node may
	// have trimmed it since) calls Versions first.
	Describe() KeyDescription
}

// MarkKeeper is a root store that keeps the high-water marks of durable
// streams (package ledger's heads: the forget ledger's last line, the
// registration WAL's last acknowledged registration) beside
// the root, where a restore of the database or of the stream's own files
// cannot roll them back with it. A mark is a JSON value the root store
// does not interpret.
type MarkKeeper interface {
	// Mark returns the mark last kept for stream, or an error wrapping
	// ErrNotFound when none was kept; ErrRootUnavailable when the store
	// does not answer.
	Mark(ctx context.Context, stream string) ([]byte, error)
	// KeepMark durably records mark as stream's mark, replacing the one
	// kept before, before it returns.
	KeepMark(ctx context.Context, stream string, mark []byte) error
}

// KeyDescription is a root key's configuration as its store last knew it,
// without a call to the backend: a Vault Transit key's name, type, the
// settings that bear on erasure and its versions. A store without a named
// external key (the local root file) gives its versions only (Name "").
// LatestVersion 0 means the store has not read its key yet.
type KeyDescription struct {
	Name                 string // the key's name in its backend; "" for none
	Type                 string // such as "aes256-gcm96"
	Exportable           bool   // the key can be exported (refused by shredd)
	AllowPlaintextBackup bool   // the key can be backed up in plaintext (refused by shredd)
	MinAvailableVersion  int    // the oldest version not yet destroyed
	LatestVersion        int    // the version new wraps use
}

// SubjectKMS keeps one external key per subject, as an alternative to the
// bucket tree (Vault Transit per-subject keys). Each subject's DEK is a data
// key wrapped by the subject's own key, and destroying that key erases the
// subject at once, without an epoch. Every method returns an error wrapping
// ErrRootUnavailable when the backend cannot be reached.
type SubjectKMS interface {
	// DataKey creates the subject's key if needed and returns a new DEK and
	// its wrapped form.
	DataKey(ctx context.Context, sid envelope.SID) (dek, wrapped []byte, err error)
	// Decrypt unwraps a DEK; a destroyed subject key gives ErrShredded.
	Decrypt(ctx context.Context, sid envelope.SID, wrapped []byte) ([]byte, error)
	// Destroy deletes the subject's key; a key already gone is not an error.
	Destroy(ctx context.Context, sid envelope.SID) error
	// Exists reports whether the subject's key still exists.
	Exists(ctx context.Context, sid envelope.SID) (bool, error)
}
