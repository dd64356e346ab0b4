// Package shredd holds the domain of the crypto-shredding key management
// service: its value types (ids, artifacts, kinds, leases, holders, forgets
// and their states, the conditions of erasure), its sentinel errors, and the
// interfaces of the services the HTTP layer uses (Sealer, Eraser, Holders,
// Evidence). It implements nothing; packages sealing and erasure do (docs/design.md).
package shredd

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"time"
)

// ID is a 16-byte identifier of an artifact or a forget, written as 32
// lowercase hex digits.
type ID [16]byte

var (
	kindRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	holderRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)
)

// ValidKind reports whether name is a well-formed kind name.
func ValidKind(name string) bool { return kindRe.MatchString(name) }

// ValidHolder reports whether id is a well-formed holder id.
func ValidHolder(id string) bool { return holderRe.MatchString(id) }

// ValidUnit reports whether id is a valid unit of work id (Reader.Unit):
// 1 to 64 characters of A-Z a-z 0-9 . _ : -.
func ValidUnit(id string) bool { return unitRe.MatchString(id) }

var unitRe = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// String returns the hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// NewID returns a new artifact, lease or forget id: the time now in
// milliseconds since 1970 (48 bits, big-endian), then 80 bits read from
// rand, as a UUIDv7 orders them. Ids made close in time sort together, so
// the registry's indexes keyed by id grow at one end: a group commit
// dirties a few pages instead of one page per index per item
// (docs/performance-archive.md). The random part keeps ids unguessable.
func NewID(now time.Time, rand io.Reader) (ID, error) {
	var id ID
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(id[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(id[2:6], uint32(ms))
	_, err := io.ReadFull(rand, id[6:])
	return id, err
}

// ParseID parses the hex form of an ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 32 {
		return id, fmt.Errorf("shredd: id of %d bytes, want 32 hex digits: %w", len(s), ErrInvalid)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("shredd: id is not 32 hex digits: %w", ErrInvalid)
	}
	return id, nil
}

// Forget states.
const (
	StateRequested = "requested"
	StateCommitted = "committed"
	StateShredded  = "shredded"
)

// Verdict states a forget reaches through verification, on top of the
// pipeline states requested, committed and shredded.
const (
	StateErased  = "erased"
	StateBlocked = "blocked"
	StateOverdue = "overdue"
)

// The five conditions of erasure (docs/design.md). A forget is erased only when
// each is proven; until then GET /v1/forgets/{id} says which are pending and
// why.
const (
	CondCascadeClosed     = "cascade_closed"
	CondWorkersQuiesced   = "workers_quiesced"
	CondReadPathConverged = "read_path_converged"
	CondClosureIntact     = "closure_intact"
	CondBackupsEpoch      = "backups_epoch"
)

// Kind is a registered artifact type.
type Kind struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// Source names what a new artifact derives from: raw subject ids and/or
// parent artifacts.
type Source struct {
	Kind     string
	Subjects []string // raw subject ids; hashed at once, never stored
	Parents  []ID
	// Leases name decrypts the derivative was made from: each gives the
	// lineage of its artifact, as a parent does.
	Leases []ID
	Holder string
	// The writer's reads (docs/api.md "What a read costs a writer"): Reader
	// is its token's id and Unit its unit of work; every lease the writer
	// holds (ReadsOf) must be named (Leases, Parents) or declared
	// independent (IndependentOf, or Independent for all of them), else
	// the write is an undeclared derivation: refused
	// (UndeclaredDerivationError) or, with InheritReads (the token's
	// policy), given those leases' lineage. Reader "" skips the check (the
	// service's own writes).
	Reader        string
	Unit          string
	Independent   bool
	IndependentOf []ID
	InheritReads  bool
	// ReadsBefore, when set, is when the write's content was complete (its
	// request body read): a lease issued after it cannot have fed it, and
	// is not the write's to answer for (a decrypt racing the write).
	ReadsBefore time.Time
}

// How a write closed one of its writer's reads (Read.How).
const (
	ReadNamed       = "named"       // the write named the lease or its artifact: it has its lineage
	ReadInherited   = "inherited"   // undeclared, given the lease's lineage by the token's policy
	ReadIndependent = "independent" // the writer declared it did not derive from it
	ReadRefused     = "refused"     // undeclared: the write was refused
)

// Reader is who a decrypt hands plaintext to (docs/api.md "What a read
// costs a writer"): the holder the lease names, and whom the read is
// attributed to: the decrypting token's id and its unit of work. Token ""
// attributes the read to nobody (the service's own reads, tests).
type Reader struct {
	Holder string
	Token  string
	Unit   string
}

// Read is one read a write was checked against: the lease, and how the
// write closed it (ReadNamed ...).
type Read struct {
	Lease ID     `json:"lease"`
	How   string `json:"how"`
}

// Artifact describes a registered artifact.
type Artifact struct {
	ID        ID
	Seq       int64 // registration order; compare with Forget.Barrier
	Kind      string
	Holder    string
	Sealed    bool
	Parents   []ID
	Lineage   int // number of subjects in the lineage
	CreatedAt time.Time
	Reads     []Read // the writer's reads the registration was checked against, and how it closed each
}

// Sealed is the result of Encrypt.
type Sealed struct {
	Artifact   ID
	Ciphertext string // text form, "shredd:v1:..."
	Lineage    int    // number of subjects in the lineage
	Inherited  []ID   // undeclared reads whose lineage the token's policy gave it (Source.InheritReads)
}

// DataKey is the result of a data key request: a registered artifact that
// the writer seals itself. Header is the envelope's header bytes and Key its
// artifact key (envelope.DataKey); envelope.SealWithKey with them gives the
// envelope. Key is as sensitive as the plaintext it seals and seals one
// plaintext only; clear it after use.
type DataKey struct {
	Artifact  ID
	Header    []byte
	Key       []byte
	Lineage   int  // number of subjects in the lineage
	Inherited []ID // as Sealed's
}

// SealInput is one item of a batch encrypt: the artifact's source, its
// plaintext and its context.
type SealInput struct {
	Source    Source
	Plaintext []byte
	Context   []byte
}

// ReregisterInput is one envelope presented to Reregister: its text form
// (or binary form in Binary), the context it was sealed with, and the
// holder to record (the envelope does not name one).
type ReregisterInput struct {
	Ciphertext string
	Binary     []byte
	Context    []byte
	Holder     string
}

// Reregistered is the result of one Reregister item: the artifact named by
// the envelope's authenticated header, and whether the registry already
// held it (Known: nothing was written).
type Reregistered struct {
	Artifact ID
	Kind     string
	Lineage  int
	Known    bool
}

// Opened is the result of Decrypt.
type Opened struct {
	Artifact  ID
	Kind      string
	Plaintext []byte
	Lease     Lease
}

// Lease records that the plaintext of an artifact was handed to a holder by
// a decrypt, until it expires or is released. A forget stays pending while a
// lease on an artifact of its lineage, issued before its barrier, is live:
// that holder may still be deriving from the data (the summarizer that
// loaded a subject's entries before the forget).
type Lease struct {
	ID         ID
	Artifact   ID
	Holder     string // "" when the caller named none
	Reader     string // the decrypting token's id ("" before reads were attributed)
	Unit       string // the reader's unit of work ("" for none)
	IssuedAt   time.Time
	ExpiresAt  time.Time
	ReleasedAt time.Time
}

// Condition is one open or met requirement of a forget, with a reason a
// person can read.
type Condition struct {
	Name   string `json:"name"`
	Status string `json:"status"` // "ok", "pending" or "failed"
	Reason string `json:"reason"`
	// Holders names, sorted, the holders a condition that is not ok waits
	// on or is broken by: for cascade_closed those owing a signed purge
	// ack, for closure_intact those whose latest inventory holds what
	// shredd never registered. Empty otherwise.
	Holders []string `json:"holders,omitempty"`
}

// Reinstatement is an operator's reinstatement of a forgotten subject
// (never named: only its generations): a new key generation started, and
// the generation its forget destroyed stays destroyed.
type Reinstatement struct {
	Generation         uint32    // the new key generation
	PreviousGeneration uint32    // the generation the forget destroyed (0: the subject never had a key)
	Forget             ID        // the forget that destroyed it, unchanged
	LogIndex           int64     // the subject_reinstated entry of the transparency log, -1 without a log
	ReinstatedAt       time.Time // UTC
}

// Forget is one erasure request for one subject (never named: only its id).
type Forget struct {
	ID          ID
	State       string
	Barrier     int64 // artifacts with a sequence at or below it were registered before the forget
	RequestedAt time.Time
	CommittedAt time.Time
	RekeyedAt   time.Time
	ShreddedAt  time.Time
	Deadline    time.Time
	ErasedAt    time.Time
	Epoch       int64 // the epoch that shredded it
	TProp       time.Duration
	// Conditions are the steps of the key destruction pipeline.
	Conditions []Condition
	// Verification holds the five conditions of erasure; the forget is
	// erased once all are ok.
	Verification []Condition
	Overdue      bool // the deadline passed before it was erased
	// Salt is the random salt of the subject commitment in the forget's
	// attestation: set only in the answer to the call that created the
	// forget, and never stored (a stored salt would let anyone holding the
	// database test guessed subject ids against the commitment).
	Salt []byte
}

// PreviewArtifact is one artifact a forget would make unreadable.
type PreviewArtifact struct {
	ID     ID
	Kind   string
	Holder string
	Sealed bool
	Hops   int // 0 for the subject's own artifacts, else the shortest parent chain from one
	Others int // other subjects in its lineage: > 0 makes it collateral
}

// Preview is what a forget of one subject would touch, computed without
// changing anything (the dry run of docs/design.md).
type Preview struct {
	// Artifacts are those whose lineage holds the subject, by hops, then in
	// registration order; at most the service's listing limit.
	Artifacts []PreviewArtifact
	// Counts over all of them, even past the listing limit.
	Direct, Derived, Collateral, PlaintextHeld, Total int
	Truncated                                         bool
	// AlreadyForgotten is true when the subject is forgotten already.
	AlreadyForgotten bool
	// Reads is what shredd observed of the reads of the lineage.
	Reads PreviewReads
}

// PreviewReads is what shredd observed of the reads of a lineage (docs/api.md
// "What a read costs a writer"): the leases issued on its artifacts, and how
// the writes their readers made while the reads were attributable closed
// them. Independent lists the artifacts declared independent (at most the
// listing limit): a forget leaves them readable.
type PreviewReads struct {
	Leases                                 int
	Named, Inherited, Independent, Refused int
	IndependentArtifacts                   []ID
	// SeparateArtifacts were written by the same readers while the reads
	// were attributable, in other units of work or under other holder
	// names (registry.LineageReads.Separate); at most the listing limit.
	SeparateArtifacts []ID
	Separate          int
}

// Holder is a component or peer agent that stores artifacts outside shredd,
// with the Ed25519 key it signs purge acks with.
type Holder struct {
	ID        string
	PublicKey ed25519.PublicKey
	CreatedAt time.Time
}

// Purge is the work one forget gives one holder: the plaintext-held
// artifacts of the forgotten subject's lineage it must drop and ack.
type Purge struct {
	Forget    ID
	Artifacts []ID
}

// Probe is a question shredd asks a holder that answers probes: does its
// retrieval path (index, caches, replicas) still return any of these
// artifacts (or markers)? The holder answers, signed, what it found
// (docs/api.md "Probes").
type Probe struct {
	ID        ID
	Forget    ID
	Nonce     string // 64 lower-case hex digits, fresh for each probe
	Artifacts []ID
	Markers   []string
	Deadline  time.Time
}

// ProbeResult is what an answer to a probe established: Clean when the
// holder's path returned nothing it was asked about.
type ProbeResult struct {
	Probe ID
	Clean bool
}

// AckResult says what an ack closed and what the holder still holds.
type AckResult struct {
	Closed  []ID // artifacts this ack covers
	Missing []ID // the holder's artifacts of the forget that no ack covers yet
}

// InventoryItem is one artifact a holder reports holding.
type InventoryItem struct {
	ID   string
	Kind string
}

// Inventory is what a holder's report revealed.
type Inventory struct {
	Items           int
	UnknownArtifact []string // ids shredd never registered (or not as this holder's)
	UnknownKind     []string // kinds shredd never registered
	// ContradictedAcks are artifacts the holder acked as purged and still
	// holds: its ack was false. They break the closure like unknown ones.
	ContradictedAcks []string
}

// Epoch is a completed (or interrupted) root epoch: the root rotated from
// FromVersion to ToVersion, every bucket key rewrapped, the versions in
// Retired destroyed.
type Epoch struct {
	ID          int64
	State       string // "running" or "done"
	StartedAt   time.Time
	FinishedAt  time.Time // zero while running
	FromVersion int       // latest root version when the epoch started
	ToVersion   int       // the version every bucket key is wrapped under at the end
	Retired     []int     // root versions destroyed by this epoch
}
