package shredd

import (
	"context"
	"time"
)

// Sealer seals and opens data under the lineage of its subjects, keeps the
// registry of artifacts and kinds, and hands out leases. Every method
// returns ErrShredded (wrapped) when a subject of the lineage is forgotten,
// ErrUnavailable when the key backend cannot be reached (nothing is sealed
// or opened then), ErrInvalid for malformed input and ErrNotFound for an id
// it does not know.
type Sealer interface {
	// PutKind registers a kind or updates its description, and reports
	// whether it is new.
	PutKind(ctx context.Context, name, description string) (Kind, bool, error)
	// Kinds lists the registered kinds by name.
	Kinds(ctx context.Context) ([]Kind, error)
	// Encrypt seals plaintext as a new artifact of src, bound to context.
	Encrypt(ctx context.Context, src Source, plaintext, context []byte) (Sealed, error)
	// EncryptBinary is Encrypt with the binary envelope appended to dst;
	// it returns the artifact id, the extended dst and the lineage size.
	EncryptBinary(ctx context.Context, src Source, plaintext, context, dst []byte) (Sealed, []byte, error)
	// EncryptMany is Encrypt of many items at once, their registrations
	// committed together; one result or error per item, in order.
	EncryptMany(ctx context.Context, in []SealInput) ([]Sealed, []error)
	// DataKeys is DataKey of many sources at once; one result or error per
	// item, in order.
	DataKeys(ctx context.Context, srcs []Source) ([]DataKey, []error)
	// DataKey registers a new artifact of src, as Encrypt does, and returns
	// its envelope header and artifact key, for the caller to seal one
	// plaintext itself (client-side sealing).
	DataKey(ctx context.Context, src Source) (DataKey, error)
	// DecryptFor opens a text envelope for who and records a lease.
	// A ciphertext that is no valid envelope, or that does not open, gives
	// ErrEnvelope.
	DecryptFor(ctx context.Context, ciphertext string, context []byte, who Reader) (Opened, error)
	// DecryptBinary is DecryptFor for a binary envelope.
	DecryptBinary(ctx context.Context, ciphertext, context []byte, who Reader) (Opened, error)
	// ReleaseLease ends a lease before its expiry; another holder's lease
	// gives ErrForbidden.
	ReleaseLease(ctx context.Context, id ID, holder string) (Lease, error)
	// Register records a plaintext-held artifact (one shredd does not seal).
	Register(ctx context.Context, src Source) (Artifact, error)
	// GetArtifact returns a registered artifact.
	GetArtifact(ctx context.Context, id ID) (Artifact, error)
	// Reregister registers again the artifacts of authentic envelopes that
	// the registry lost (a database restored from before they were
	// sealed), trusting only each envelope's authenticated header; one
	// result or error per item, in order. An envelope that does not open
	// with the live keys of its lineage and its context gives ErrEnvelope,
	// one whose lineage holds a forgotten subject ErrShredded; a known
	// artifact is answered Known, with nothing written.
	Reregister(ctx context.Context, in []ReregisterInput) ([]Reregistered, []error)
}

// Eraser forgets subjects and verifies it: the barrier and the key
// destruction, and the verification of the five conditions of erasure.
// Errors as Sealer's.
type Eraser interface {
	// Preview is the dry run of a forget: what it would make unreadable.
	Preview(ctx context.Context, subject string) (Preview, error)
	// Forget commits the forget of subject (idempotent: a second call
	// returns the same forget) and returns its pending-erasure token.
	Forget(ctx context.Context, subject string) (Forget, error)
	// GetForget returns a forget with its conditions.
	GetForget(ctx context.Context, id ID) (Forget, error)
	// Forgets lists forgets, of one state when state is not "".
	Forgets(ctx context.Context, state string, limit int) ([]Forget, error)
	// ListForgets answers a page of forgets (ForgetQuery), with a cursor
	// for the next page and the counts of every state; a malformed state,
	// limit or cursor gives ErrInvalid.
	ListForgets(ctx context.Context, q ForgetQuery) (ForgetPage, error)
	// CountForgets counts the forgets by state, and the overdue ones.
	CountForgets(ctx context.Context) (byState map[string]int, overdue int, err error)
	// Verify evaluates a forget's conditions now and records it erased
	// when all hold.
	Verify(ctx context.Context, id ID) (Forget, error)
	// RunEpoch runs a root epoch now.
	RunEpoch(ctx context.Context) (Epoch, error)
}

// Reinstater gives forgotten subjects a new life. Errors as Sealer's.
type Reinstater interface {
	// Reinstate gives a forgotten subject a new key generation (reason is
	// the operator's, kept with it and never logged). A subject without a
	// committed forget (live, reinstated already, never seen) gives
	// ErrNotForgotten; one whose forget is not erased yet ErrNotErased;
	// per-subject keys ErrUnsupported.
	Reinstate(ctx context.Context, subject, reason string) (Reinstatement, error)
}

// Holders keeps the holders of plaintext-held artifacts, their purge work
// and their signed acks, which close a forget's plaintext-held artifacts,
// and their inventories, which can block it. Errors as Sealer's.
type Holders interface {
	// RegisterHolder records a holder's Ed25519 key (ErrConflict for
	// another key of a known holder) and reports whether it is new.
	RegisterHolder(ctx context.Context, id string, pub []byte) (Holder, bool, error)
	// ListHolders answers a page of registered holders (HolderQuery) with
	// their pending purge work, last ack and latest inventory, and a
	// cursor for the next page; a malformed limit or cursor gives
	// ErrInvalid.
	ListHolders(ctx context.Context, q HolderQuery) (HolderPage, error)
	// Purges lists the purge work of a holder.
	Purges(ctx context.Context, holder string) ([]Purge, error)
	// Ack records a holder's signed purge ack (ErrSignature when it does
	// not verify).
	Ack(ctx context.Context, forget ID, holder string, artifacts []ID, sig []byte) (AckResult, error)
	// ReportInventory records what a holder reports holding.
	ReportInventory(ctx context.Context, holder string, items []InventoryItem) (Inventory, error)
	// DeclareProbes records that a holder answers probes, and its
	// compaction interval (0 withdraws: its acks alone close again);
	// ErrInvalid for an interval out of bounds.
	DeclareProbes(ctx context.Context, holder string, compact time.Duration) error
	// Probes lists the probes a holder must answer now.
	Probes(ctx context.Context, holder string) ([]Probe, error)
	// AnswerProbe records a holder's signed answer to a probe
	// (ErrSignature when it does not verify, ErrNotFound for a probe not
	// open to it, ErrConflict when already answered, ErrInvalid when it
	// found something it was not asked about).
	AnswerProbe(ctx context.Context, holder string, probe ID, found []string, sig []byte) (ProbeResult, error)
}

// Evidence proves erasures to those who do not trust the service: the
// signed attestation. (The regulator export and the transparency log are
// served through api.Evidence, in the types of their formats, bundle and
// translog, which the root package does not import.) Errors as Sealer's,
// and ErrNotErased for an attestation of a forget not yet erased.
type Evidence interface {
	// Attestation returns the signed erasure attestation of an erased
	// forget, signed by the service's one signer (ErrUnavailable when it
	// has none).
	Attestation(ctx context.Context, id ID) ([]byte, error)
}

// Service is what the HTTP layer serves: sealing, erasure, the holders,
// the evidence and reinstatement.
type Service interface {
	Sealer
	Eraser
	Holders
	Evidence
	Reinstater
}

// Join returns the Service of a Sealer, an Eraser, its Holders, its
// Evidence and its Reinstater: every method of each, as it is. The composition root builds
// the Sealer and the erasure apart (they share the registry and the key
// tree, not each other) and joins them for the HTTP layer.
func Join(s Sealer, e Eraser, h Holders, v Evidence, r Reinstater) Service {
	return joined{s, e, h, v, r}
}

// joined is a Sealer, an Eraser, Holders and Evidence as one Service.
type joined struct {
	Sealer
	Eraser
	Holders
	Evidence
	Reinstater
}
