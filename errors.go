package shredd

import (
	"errors"
	"fmt"
)

// Errors of shredd's domain services. The services wrap them with %w and the
// operation; callers test with errors.Is, and api maps each to its HTTP status.
var (
	// ErrInvalid means the request is malformed (bad kind name, no subject,
	// too many parents, bad id ...).
	ErrInvalid = errors.New("invalid request")
	// ErrUnknownKind means the artifact's kind was never registered.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrUnknownParent means a named parent artifact is not in the registry.
	ErrUnknownParent = errors.New("unknown parent artifact")
	// ErrNotFound means the named forget or artifact does not exist.
	ErrNotFound = errors.New("not found")
	// ErrShredded means a subject of the lineage was forgotten: the data
	// existed and has been erased.
	ErrShredded = errors.New("shredded")
	// ErrTooLarge means a plaintext, context or lineage exceeds its limit.
	ErrTooLarge = errors.New("too large")
	// ErrEnvelope means a ciphertext is not a valid shredd envelope, or it
	// fails to open with its keys and the given context.
	ErrEnvelope = errors.New("invalid envelope")
	// ErrUnavailable means a backend the request needs cannot be reached
	// (the root store, or the database's locks), or the service is closing;
	// nothing was carried out (fail closed), and the request may be tried
	// again. Packages keep their own cause apart
	// (keystore.ErrRootUnavailable, storage.ErrDBUnavailable) and the
	// services wrap it in this one.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrForbidden means the caller acts for another holder than the one
	// that owns the lease, artifact or ack.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict means the request contradicts what is registered (a
	// holder's key cannot be replaced).
	ErrConflict = errors.New("conflict")
	// ErrSignature means a holder's signature does not verify.
	ErrSignature = errors.New("invalid signature")
	// ErrNotErased means an attestation was asked for a forget that is not
	// erased: there is nothing to attest yet.
	ErrNotErased = errors.New("forget not erased")
	// ErrNotForgotten means a reinstatement was asked for a subject that
	// has no committed forget to follow: it is live (never forgotten, or
	// reinstated already), or was never seen.
	ErrNotForgotten = errors.New("subject not forgotten")
	// ErrUnsupported means the service's configuration does not offer the
	// operation (reinstatement with per-subject keys).
	ErrUnsupported = errors.New("not supported by this configuration")
	// ErrNoLog means the service keeps no transparency log, or the forget's
	// events are not in it (it was erased before the log existed).
	ErrNoLog = errors.New("not in the transparency log")
	// ErrLedger means the forget ledger cannot be read or written, or holds a
	// line whose MAC does not verify: shredd stops rather than guess which
	// forgets happened.
	ErrLedger = errors.New("forget ledger unusable")
	// ErrUnknownArtifact means an authentic envelope names an artifact the
	// registry does not hold: the database is older than the ciphertext (a
	// restore of a backup taken before it was sealed). shredd refuses to
	// open it until it is registered again (POST /v1/artifacts/reregister),
	// so that every readable artifact is one a forget can find.
	ErrUnknownArtifact = errors.New("artifact not in the registry")
)

// Integrity errors: what shredd read back or opened is not what it wrote.
var (
	// ErrIntegrity means a value shredd stored does not authenticate or read
	// back as written (a sealed salt that does not open, say): shredd
	// refuses rather than answer from it.
	ErrIntegrity = errors.New("integrity check failed")
)

// Errors of the disks shredd writes to.
var (
	// ErrDiskFull means a disk shredd must write to is full, over quota or
	// read-only (ENOSPC, EDQUOT, EROFS): nothing was committed; retry
	// later (HTTP 503 with Retry-After).
	ErrDiskFull = errors.New("disk full or read-only")
)

// Errors of the bearer tokens of the HTTP API.
var (
	// ErrTokenInvalid means a bearer token is unknown, expired or revoked.
	ErrTokenInvalid = errors.New("invalid token")
)

// ErrUndeclaredDerivation means a write was made while its writer held
// reads (leases) it neither named nor declared independent of, and its
// token's policy refuses such writes (UndeclaredDerivationError).
var ErrUndeclaredDerivation = errors.New("undeclared derivation")

// MaxListedReads bounds the leases an UndeclaredDerivationError lists.
const MaxListedReads = 100

// UndeclaredDerivationError is ErrUndeclaredDerivation with the leases the
// write left undeclared (at most MaxListedReads, sorted) and how many
// there were (at least Count when More).
type UndeclaredDerivationError struct {
	Leases []ID
	Count  int
	More   bool
}

func (e *UndeclaredDerivationError) Error() string {
	return fmt.Sprintf("%s reads of the writer are neither named nor declared independent: %v", e.Counted(), ErrUndeclaredDerivation)
}

// Counted is the number of undeclared reads in words: "3", or "at least
// 4097".
func (e *UndeclaredDerivationError) Counted() string {
	if e.More {
		return fmt.Sprintf("at least %d", e.Count)
	}
	return fmt.Sprint(e.Count)
}

// Unwrap makes errors.Is(err, ErrUndeclaredDerivation) hold.
func (e *UndeclaredDerivationError) Unwrap() error { return ErrUndeclaredDerivation }
