// Package attest implements shredd's erasure attestation, as specified in
// docs/attestation.md: an in-toto Statement v1
// (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md)
// whose predicate (PredicateType) records one forget, signed with Ed25519
// inside a DSSE envelope (https://github.com/secure-systems-lab/dsse).
//
// The statement's subject is a salted commitment to the subject id, never
// the id itself (Commit). Whoever holds the id and the salt can check an
// attestation offline with Open and Statement.CheckSubject, with no access
// to the service; `shredd verify` is that check on the command line.
//
// The package imports only the standard library and no other shredd
// package, so the offline verifier stays small. The statement format
// (types, ParseStatement, Statement.Marshal, Statement.Validate, in
// format.go) is kept apart from the cryptography (commitments, DSSE
// signatures, holder acks and key files, in attest.go and keys.go); the one
// crossing is that Validate checks the holder acks' signatures, which are
// part of the statement.
package attest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Errors. Open, ParseStatement and Validate wrap exactly one of them, so
// that a verifier can say which check failed.
var (
	// ErrFormat means the input is not a well-formed attestation of this
	// version: bad JSON, an unknown or missing field, a wrong type, a
	// non-canonical encoding, or a value outside its allowed set.
	ErrFormat = errors.New("malformed attestation")
	// ErrSignature means the DSSE signature does not verify under the given
	// key, or the envelope names another key.
	ErrSignature = errors.New("attestation signature invalid")
	// ErrCommitment means the subject id and salt do not open the
	// statement's subject commitment.
	ErrCommitment = errors.New("subject commitment mismatch")
	// ErrClaim means the predicate does not make the erasure claim in the
	// exact wording (Claim).
	ErrClaim = errors.New("attestation does not claim erasure")
	// ErrCondition means a condition of erasure is missing, unknown,
	// repeated, or not "ok".
	ErrCondition = errors.New("condition of erasure not met")
	// ErrTimeline means the timeline is incomplete, not in UTC, or out of
	// order.
	ErrTimeline = errors.New("forget timeline invalid")
	// ErrKeyEvidence means the key evidence does not support the claim: no
	// retired root version after an epoch, or a root key configuration that
	// lets copies of the root exist outside the root store.
	ErrKeyEvidence = errors.New("key evidence does not support erasure")
	// ErrAck means a holder ack does not verify, or the acks and the
	// artifacts closed by them do not match one to one.
	ErrAck = errors.New("holder ack invalid")
	// ErrResidual means a residual the attestation must state is missing,
	// or a residual is malformed.
	ErrResidual = errors.New("residual missing")
	// ErrProbe means a holder's probe answer in the attestation does not
	// verify, found something, or is not about that holder's acked
	// artifacts (docs/attestation.md §6a).
	ErrProbe = errors.New("holder probe invalid")
	// ErrKey means a key or key file is malformed or not Ed25519.
	ErrKey = errors.New("invalid attestation key")
)

// Identifiers of the format.
const (
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateType names this predicate, version 1.
	PredicateType = "https://shredd.dev/attestation/erasure/v1"
	// SubjectName is the name of the statement's only subject: the
	// commitment to the subject id.
	SubjectName = "subject-commitment"
	// Claim is the exact wording of the erasure claim. An attestation says
	// the subject's data was made unreadable by destroying keys; it never
	// says "deleted", which nobody can prove about copies held elsewhere.
	Claim = "cryptographically erased"
)

// The five conditions of erasure (docs/attestation.md, docs/design.md).
const (
	CondCascadeClosed     = "cascade_closed"      // every artifact of the lineage closure is sealed or acked by its holder
	CondWorkersQuiesced   = "workers_quiesced"    // no pre-barrier lease on the lineage is still live
	CondReadPathConverged = "read_path_converged" // cache TTLs passed, old root versions gone, a real decrypt fails
	CondClosureIntact     = "closure_intact"      // every artifact has a registered kind; no unregistered holdings reported
	CondBackupsEpoch      = "backups_epoch"       // the epoch rotation that followed the barrier completed
)

// conditionNames are the five conditions of erasure, in the order of the
// design.
var conditionNames = [...]string{CondCascadeClosed, CondWorkersQuiesced, CondReadPathConverged, CondClosureIntact, CondBackupsEpoch}

// Conditions returns the names of the five conditions of erasure, in the
// order of the design; every attestation has each exactly once, all
// StatusOK.
func Conditions() []string { return slices.Clone(conditionNames[:]) }

// Condition statuses. Only StatusOK lets an attestation verify; the others
// exist so that a pending statement can be written down and refused.
const (
	StatusOK      = "ok"
	StatusPending = "pending"
)

// Root stores (KeyEvidence.RootStore).
const (
	RootStoreLocal                  = "local"                     // the embedded root file
	RootStoreVaultTransit           = "vault-transit"             // one Vault Transit root key over the key tree
	RootStoreVaultTransitPerSubject = "vault-transit-per-subject" // one Vault Transit key per subject
)

// How an artifact was closed (Artifact.ClosedBy).
const (
	// ClosedSealedKeyDestroyed: the artifact is a shredd ciphertext whose
	// lineage includes the destroyed subject key, so it is unreadable.
	ClosedSealedKeyDestroyed = "sealed_key_destroyed"
	// ClosedHolderAck: the artifact was held in plaintext outside shredd
	// and its holder signed a purge ack (HolderAck) naming it.
	ClosedHolderAck = "holder_ack"
)

// Residual kinds: what the attestation cannot rule out, stated rather than
// hidden. Other kinds are allowed.
const (
	// ResidualRootStoreSnapshots: snapshots of the root store taken before
	// the old root versions were destroyed still hold them; their retention
	// is the residual horizon. Required in every attestation.
	ResidualRootStoreSnapshots = "root_store_snapshots"
	// ResidualCollateralAggregates: aggregates shared with other subjects
	// became unreadable too and must be rebuilt by their holders.
	ResidualCollateralAggregates = "collateral_aggregates"
	// ResidualHolderTrust: a holder ack proves the holder said it purged,
	// under a key shredd registered; not that it kept no copy. Required
	// when there are holder acks.
	ResidualHolderTrust = "holder_trust"
	// ResidualAckOnlyHolders: holders that answer no probes, whose
	// artifacts are closed by their acks alone (§6a).
	ResidualAckOnlyHolders = "ack_only_holders"
	// ResidualNoKeyIssued: no key was ever issued for the subject, so none
	// was destroyed; the claim rests on the tombstone that refuses the
	// subject from the forget on. Present exactly when that is so.
	ResidualNoKeyIssued = "no_key_issued"
	// ResidualLostRegistrations: registrations shredd acknowledged were
	// lost (a restore, a lost database or lost WAL segments) and an
	// operator accepted the loss (shredd wal accept-loss): artifacts
	// among them, of unknown lineage, are outside the proof. Present in
	// every attestation signed after such a loss.
	ResidualLostRegistrations = "lost_registrations"
	// ResidualUnobservedReads: shredd observes reads through its decrypt
	// (leases) and the writes of the same reader; plaintext a writer kept
	// past its lease, got elsewhere or handed to another token or process
	// is not observed, and its derivatives are in the lineage only where
	// their writers declared them. Required in every attestation.
	ResidualUnobservedReads = "unobserved_reads"
	// ResidualIndependentWrites: writes made while their writers held
	// reads of the lineage were declared independent of them by the
	// writers; they stay readable, and that they derive nothing from the
	// subject's data rests on those declarations. Present when there are.
	ResidualIndependentWrites = "independent_writes"
	// ResidualSeparateWrites: artifacts written by the readers of the
	// lineage while their reads were attributable, in another unit of
	// work or under another holder name, so not checked against those
	// reads: they stay readable, and that they are separate rests on the
	// writers' units. Present when there are.
	ResidualSeparateWrites = "separate_writes"
	// ResidualReadsAttributable: reads of the lineage were still
	// attributable to their readers when the attestation was signed; what
	// they write until then in other units or declared independent is not
	// in it. Present when there are.
	ResidualReadsAttributable = "reads_attributable"
)

// maxID bounds identifiers (forget, artifact, holder, kind) in bytes.
const maxID = 256

// Statement is an in-toto Statement v1 carrying the erasure predicate.
type Statement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     Predicate            `json:"predicate"`
}

// ResourceDescriptor is an in-toto subject, restricted to the two fields
// this format uses.
type ResourceDescriptor struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Predicate is the erasure record of one forget.
type Predicate struct {
	Forget      string      `json:"forget"` // the forget's id
	Claim       string      `json:"claim"`  // exactly Claim
	Timeline    Timeline    `json:"timeline"`
	KeyEvidence KeyEvidence `json:"key_evidence"`
	Artifacts   []Artifact  `json:"artifacts"` // the subject's lineage closure
	Conditions  []Condition `json:"conditions"`
	HolderAcks  []HolderAck `json:"holder_acks"`
	Residuals   []Residual  `json:"residuals"`
	// Probes are the holders' signed answers to the probes that closed
	// their artifacts after their acks (§6a): absent when no holder of
	// the lineage offers probes, so attestations without probes keep
	// their bytes.
	Probes []Probe `json:"probes,omitempty"`
}

// Timeline is when the forget reached each state (RFC 3339, UTC), in order
// requested ≤ committed ≤ shredded ≤ erased.
type Timeline struct {
	Requested time.Time `json:"requested"`
	Committed time.Time `json:"committed"` // barrier written, subject key deleted
	Shredded  time.Time `json:"shredded"`  // bucket re-keyed and root epoch rotated (or the subject's Transit key deleted)
	Erased    time.Time `json:"erased"`    // every condition proven; the attestation was signed
}

// KeyEvidence is what the root store reported about the destroyed keys.
type KeyEvidence struct {
	RootStore           string         `json:"root_store"`            // a RootStore constant
	RetiredRootVersions []int          `json:"retired_root_versions"` // root versions destroyed by the epoch, ascending
	RootKeyConfig       *RootKeyConfig `json:"root_key_config,omitempty"`
	Epoch               int64          `json:"epoch"` // the root epoch that shredded the forget (0 with per-subject keys)
}

// RootKeyConfig is the Vault Transit root key's configuration as read by
// the service.
type RootKeyConfig struct {
	Name                 string `json:"name"`
	Type                 string `json:"type"`
	Exportable           bool   `json:"exportable"`
	AllowPlaintextBackup bool   `json:"allow_plaintext_backup"`
	MinAvailableVersion  int    `json:"min_available_version"`
	LatestVersion        int    `json:"latest_version"`
}

// Artifact is one artifact of the lineage closure and how it was closed.
type Artifact struct {
	ID           string `json:"id"`
	Kind         string `json:"kind"`
	Holder       string `json:"holder"`                  // may be empty for sealed artifacts
	ClosedBy     string `json:"closed_by"`               // ClosedSealedKeyDestroyed or ClosedHolderAck
	AckSignature []byte `json:"ack_signature,omitempty"` // the closing HolderAck's signature, with ClosedHolderAck only
}

// Condition is one condition of erasure with the evidence that met it.
type Condition struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Evidence string `json:"evidence"`
}

// HolderAck is a holder's signed purge ack: an Ed25519 signature by the
// holder's registered key over AckMessage(forget, holder, artifacts).
type HolderAck struct {
	Holder    string   `json:"holder"`
	PublicKey []byte   `json:"public_key"` // raw Ed25519 public key, 32 bytes
	Signature []byte   `json:"signature"`
	Artifacts []string `json:"artifacts"` // ids of the artifacts the ack closes
}

// Probe is a holder's signed answer to a probe: shredd asked the holder,
// with a fresh nonce, to query its own retrieval path (its index, caches
// and replicas) for artifacts it had acked as purged (and canary markers),
// and the holder answered what the path returned (docs/attestation.md
// §6a). In an attestation every probe found nothing.
type Probe struct {
	Holder     string    `json:"holder"`
	Probe      string    `json:"probe"`             // the probe's id, 32 lower-case hex digits
	Nonce      string    `json:"nonce"`             // shredd's challenge, 64 lower-case hex digits
	AskedAt    time.Time `json:"asked_at"`          // when shredd made the probe visible to the holder
	AnsweredAt time.Time `json:"answered_at"`       // when shredd received the signed answer
	Artifacts  []string  `json:"artifacts"`         // the artifact ids asked, sorted
	Markers    []string  `json:"markers,omitempty"` // the markers asked, sorted (canaries)
	Found      []string  `json:"found"`             // what the holder's path returned: none
	Signature  []byte    `json:"signature"`         // Ed25519 over ProbeMessage, under the holder's ack key
}

// Residual is something the attestation cannot rule out.
type Residual struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

// NewStatement returns the statement of predicate p about the subject
// committed to by commitment (Commit).
func NewStatement(commitment string, p Predicate) Statement {
	return Statement{
		Type:          StatementType,
		Subject:       []ResourceDescriptor{{Name: SubjectName, Digest: map[string]string{"sha256": commitment}}},
		PredicateType: PredicateType,
		Predicate:     p,
	}
}

// Commitment returns the statement's subject commitment (hex), or "" when
// the subject is not of the expected shape.
func (s *Statement) Commitment() string {
	if len(s.Subject) != 1 {
		return ""
	}
	return s.Subject[0].Digest["sha256"]
}

// CheckSubject reports whether subject and salt open the statement's
// commitment; it returns nil or an error wrapping ErrCommitment.
func (s *Statement) CheckSubject(subject string, salt []byte) error {
	if !CheckCommitment(subject, salt, s.Commitment()) {
		return fmt.Errorf("attest: the subject id and salt do not match the statement's commitment: %w", ErrCommitment)
	}
	return nil
}

// Marshal returns the canonical encoding of s, the exact bytes that Sign
// signs: encoding/json's compact form of the struct, fields in declaration
// order, nil lists written as [].
func (s *Statement) Marshal() ([]byte, error) {
	c := *s
	p := &c.Predicate
	p.KeyEvidence.RetiredRootVersions = orEmpty(p.KeyEvidence.RetiredRootVersions)
	p.Artifacts = orEmpty(p.Artifacts)
	p.Conditions = orEmpty(p.Conditions)
	p.Residuals = orEmpty(p.Residuals)
	p.HolderAcks = slices.Clone(orEmpty(p.HolderAcks))
	for i := range p.HolderAcks {
		p.HolderAcks[i].Artifacts = orEmpty(p.HolderAcks[i].Artifacts)
	}
	p.Probes = slices.Clone(p.Probes) // nil stays nil: omitted
	for i := range p.Probes {
		p.Probes[i].Artifacts = orEmpty(p.Probes[i].Artifacts)
		p.Probes[i].Found = orEmpty(p.Probes[i].Found)
	}
	c.Subject = orEmpty(c.Subject)
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("attest: marshal statement: %v: %w", err, ErrFormat)
	}
	return b, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ParseStatement parses and validates a statement (a DSSE payload). It
// checks no signature: use Open for anything received. Parsing is strict:
// unknown fields are refused, and so is any payload that is not exactly
// the canonical encoding of the statement it parses to (Marshal), so one
// signed payload has one reading (no duplicate keys, no case-folded names,
// no alternative spellings of strings, numbers or times).
func ParseStatement(payload []byte) (*Statement, error) {
	var s Statement
	if err := DecodeStrict(payload, &s); err != nil {
		return nil, fmt.Errorf("attest: statement: %v: %w", err, ErrFormat)
	}
	canon, err := s.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canon, payload) {
		return nil, fmt.Errorf("attest: statement is not in canonical form: %w", ErrFormat)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// DecodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data. It is the first step of every strict reader of
// attest's JSON (this package's and bundle's): the canonical-form check
// comes after it.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Validate checks everything about s that needs no key: the in-toto
// envelope fields, the claim's wording, the timeline, the key evidence,
// the artifacts, the five conditions (all ok), the holder acks (their
// signatures included) and the required residuals. It returns nil or an
// error wrapping one of the package's errors.
func (s *Statement) Validate() error {
	if s.Type != StatementType {
		return formatErr("_type is %q, want %q", s.Type, StatementType)
	}
	if s.PredicateType != PredicateType {
		return formatErr("predicateType is %q, want %q", s.PredicateType, PredicateType)
	}
	if len(s.Subject) != 1 || s.Subject[0].Name != SubjectName || len(s.Subject[0].Digest) != 1 {
		return formatErr("subject must be one %q with a single sha256 digest", SubjectName)
	}
	if !validCommitment(s.Subject[0].Digest["sha256"]) {
		return formatErr("subject digest must be a sha256 of 64 lower-case hex digits")
	}
	p := &s.Predicate
	if p.Claim != Claim {
		return fmt.Errorf("attest: claim is %q, want exactly %q: %w", p.Claim, Claim, ErrClaim)
	}
	if !validID(p.Forget) {
		return formatErr("forget id %q is empty, too long or not printable", p.Forget)
	}
	if err := p.Timeline.validate(); err != nil {
		return err
	}
	if err := p.KeyEvidence.validate(); err != nil {
		return err
	}
	artifacts := make(map[string]*Artifact, len(p.Artifacts))
	for i := range p.Artifacts {
		a := &p.Artifacts[i]
		if err := a.validate(); err != nil {
			return err
		}
		if artifacts[a.ID] != nil {
			return formatErr("artifact %s listed twice", a.ID)
		}
		artifacts[a.ID] = a
	}
	if err := validateConditions(p.Conditions); err != nil {
		return err
	}
	if err := validateAcks(p.Forget, p.HolderAcks, artifacts); err != nil {
		return err
	}
	if err := validateProbes(p); err != nil {
		return err
	}
	return validateResiduals(p)
}

func formatErr(format string, a ...any) error {
	return fmt.Errorf("attest: %s: %w", fmt.Sprintf(format, a...), ErrFormat)
}

// validID reports whether s is a usable identifier: 1 to maxID bytes of
// printable ASCII without spaces (so that AckMessage is unambiguous).
func validID(s string) bool {
	if s == "" || len(s) > maxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func validCommitment(c string) bool {
	if len(c) != 64 || strings.ToLower(c) != c {
		return false
	}
	_, err := hex.DecodeString(c)
	return err == nil
}

func (t *Timeline) validate() error {
	steps := []struct {
		name string
		at   time.Time
	}{{"requested", t.Requested}, {"committed", t.Committed}, {"shredded", t.Shredded}, {"erased", t.Erased}}
	for i, st := range steps {
		if st.at.IsZero() {
			return fmt.Errorf("attest: timeline: %s missing: %w", st.name, ErrTimeline)
		}
		if _, off := st.at.Zone(); off != 0 {
			return fmt.Errorf("attest: timeline: %s is not in UTC: %w", st.name, ErrTimeline)
		}
		if i > 0 && st.at.Before(steps[i-1].at) {
			return fmt.Errorf("attest: timeline: %s (%s) before %s (%s): %w",
				st.name, st.at.Format(time.RFC3339Nano), steps[i-1].name, steps[i-1].at.Format(time.RFC3339Nano), ErrTimeline)
		}
	}
	return nil
}

func (k *KeyEvidence) validate() error {
	switch k.RootStore {
	case RootStoreLocal, RootStoreVaultTransit, RootStoreVaultTransitPerSubject:
	default:
		return formatErr("key_evidence: unknown root_store %q", k.RootStore)
	}
	if k.Epoch < 0 {
		return formatErr("key_evidence: negative epoch")
	}
	for i, v := range k.RetiredRootVersions {
		if v < 1 || (i > 0 && v <= k.RetiredRootVersions[i-1]) {
			return formatErr("key_evidence: retired_root_versions must be positive and strictly ascending")
		}
	}
	// With the key tree, a pre-forget backup is only unreadable once an
	// epoch has destroyed the root versions that wrapped it.
	if k.RootStore != RootStoreVaultTransitPerSubject && (k.Epoch < 1 || len(k.RetiredRootVersions) == 0) {
		return fmt.Errorf("attest: key_evidence: root store %s needs an epoch that retired at least one root version: %w", k.RootStore, ErrKeyEvidence)
	}
	if c := k.RootKeyConfig; c != nil {
		if c.Exportable || c.AllowPlaintextBackup {
			return fmt.Errorf("attest: key_evidence: root key %q is exportable or allows plaintext backup, so copies of retired versions may exist outside the root store: %w", c.Name, ErrKeyEvidence)
		}
		if c.MinAvailableVersion < 0 || c.LatestVersion < c.MinAvailableVersion {
			return formatErr("key_evidence: root_key_config versions inconsistent")
		}
		if n := len(k.RetiredRootVersions); n > 0 && c.MinAvailableVersion > 0 && k.RetiredRootVersions[n-1] >= c.MinAvailableVersion {
			return fmt.Errorf("attest: key_evidence: root version %d reported retired but min_available_version is %d: %w",
				k.RetiredRootVersions[n-1], c.MinAvailableVersion, ErrKeyEvidence)
		}
	}
	return nil
}

func (a *Artifact) validate() error {
	if !validID(a.ID) {
		return formatErr("artifact id %q is empty, too long or not printable", a.ID)
	}
	if !validID(a.Kind) {
		return formatErr("artifact %s: kind %q is empty, too long or not printable", a.ID, a.Kind)
	}
	if a.Holder != "" && !validID(a.Holder) {
		return formatErr("artifact %s: holder %q too long or not printable", a.ID, a.Holder)
	}
	switch a.ClosedBy {
	case ClosedSealedKeyDestroyed:
		if a.AckSignature != nil {
			return formatErr("artifact %s: ack_signature on a sealed artifact", a.ID)
		}
	case ClosedHolderAck:
		if a.Holder == "" || len(a.AckSignature) != 64 {
			return formatErr("artifact %s: closed by holder_ack needs a holder and a 64-byte ack_signature", a.ID)
		}
	default:
		return formatErr("artifact %s: unknown closed_by %q", a.ID, a.ClosedBy)
	}
	return nil
}

func validateConditions(cs []Condition) error {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		if !slices.Contains(conditionNames[:], c.Name) {
			return fmt.Errorf("attest: unknown condition %q: %w", c.Name, ErrCondition)
		}
		if seen[c.Name] {
			return fmt.Errorf("attest: condition %s listed twice: %w", c.Name, ErrCondition)
		}
		seen[c.Name] = true
		if c.Status != StatusOK {
			return fmt.Errorf("attest: condition %s is %q, not ok (%s): %w", c.Name, c.Status, c.Evidence, ErrCondition)
		}
		if Blank(c.Evidence) {
			return fmt.Errorf("attest: condition %s is ok without evidence: %w", c.Name, ErrCondition)
		}
	}
	for _, name := range conditionNames {
		if !seen[name] {
			return fmt.Errorf("attest: condition %s missing: %w", name, ErrCondition)
		}
	}
	return nil
}

func validateAcks(forget string, acks []HolderAck, artifacts map[string]*Artifact) error {
	closedBy := map[string]*HolderAck{} // artifact id → the ack that closes it
	for i := range acks {
		h := &acks[i]
		if err := h.verify(forget); err != nil {
			return err
		}
		for _, id := range h.Artifacts {
			a := artifacts[id]
			if a == nil || a.ClosedBy != ClosedHolderAck || a.Holder != h.Holder {
				return fmt.Errorf("attest: holder %s acks artifact %s, which is not one of its plaintext-held artifacts here: %w", h.Holder, id, ErrAck)
			}
			if closedBy[id] != nil {
				return fmt.Errorf("attest: artifact %s acked twice: %w", id, ErrAck)
			}
			closedBy[id] = h
		}
	}
	for id, a := range artifacts {
		if a.ClosedBy != ClosedHolderAck {
			continue
		}
		h := closedBy[id]
		if h == nil {
			return fmt.Errorf("attest: artifact %s is closed by holder_ack but no ack of holder %s names it: %w", id, a.Holder, ErrAck)
		}
		if !bytes.Equal(h.Signature, a.AckSignature) {
			return fmt.Errorf("attest: artifact %s: ack_signature is not the signature of the ack that closes it: %w", id, ErrAck)
		}
	}
	return nil
}

// validateProbes checks the probes of §6a: each by a holder with an ack
// here, under that ack's key, about artifacts that ack closes, asked after
// the commit and answered before the erasure, found nothing.
func validateProbes(p *Predicate) error {
	// A holder's key (its last ack's: shredd registers one key per holder
	// and never replaces it) and every artifact its acks close, over all
	// of its acks.
	keys, closed := map[string][]byte{}, map[string]map[string]bool{}
	for _, h := range p.HolderAcks {
		keys[h.Holder] = h.PublicKey
		if closed[h.Holder] == nil {
			closed[h.Holder] = map[string]bool{}
		}
		for _, id := range h.Artifacts {
			closed[h.Holder][id] = true
		}
	}
	seen := map[string]bool{}
	for i := range p.Probes {
		pr := &p.Probes[i]
		key := keys[pr.Holder]
		bad := func(why string) error {
			return fmt.Errorf("attest: probe %s of holder %s: %s: %w", truncate(pr.Probe), truncate(pr.Holder), why, ErrProbe)
		}
		switch {
		case key == nil:
			return bad("the holder has no ack here")
		case !lowerHex(pr.Probe, 32) || seen[pr.Probe]:
			return bad("the probe id is not 32 lower-case hex digits, or is repeated")
		case !lowerHex(pr.Nonce, 64):
			return bad("the nonce is not 64 lower-case hex digits")
		case len(pr.Artifacts) == 0 || !sortedUnique(pr.Artifacts) || !sortedUnique(pr.Markers):
			return bad("the artifacts asked are empty, or the artifacts or markers are not sorted and unique")
		case len(pr.Found) != 0:
			return bad("the probe found something")
		case !utc(pr.AskedAt) || !utc(pr.AnsweredAt) || pr.AskedAt.Before(p.Timeline.Committed) ||
			pr.AnsweredAt.Before(pr.AskedAt) || pr.AnsweredAt.After(p.Timeline.Erased):
			return bad("asked before the commit, answered before it was asked or after the erasure, or a time not in UTC")
		}
		for _, m := range pr.Markers {
			if !validID(m) {
				return bad("a marker is not printable ASCII")
			}
		}
		for _, id := range pr.Artifacts {
			if !closed[pr.Holder][id] {
				return bad("artifact " + truncate(id) + " is not one its acks close")
			}
		}
		if !ed25519.Verify(ed25519.PublicKey(key), ProbeMessage(pr.Probe, p.Forget, pr.Holder, pr.Nonce, pr.Artifacts, pr.Markers, pr.Found), pr.Signature) {
			return bad("the signature does not verify under the holder's ack key")
		}
		seen[pr.Probe] = true
	}
	return nil
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func sortedUnique(xs []string) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i-1] >= xs[i] {
			return false
		}
	}
	return true
}

func utc(t time.Time) bool { _, off := t.Zone(); return off == 0 }

func validateResiduals(p *Predicate) error {
	kinds := map[string]bool{}
	for _, r := range p.Residuals {
		if !validResidualKind(r.Kind) || Blank(r.Description) {
			return fmt.Errorf("attest: residual %q: the kind must be lower-case snake_case and the description non-empty: %w", r.Kind, ErrResidual)
		}
		kinds[r.Kind] = true
	}
	if !kinds[ResidualRootStoreSnapshots] {
		return fmt.Errorf("attest: residual %s missing: the retention of root store snapshots is the residual horizon of every erasure: %w", ResidualRootStoreSnapshots, ErrResidual)
	}
	if len(p.HolderAcks) > 0 && !kinds[ResidualHolderTrust] {
		return fmt.Errorf("attest: residual %s missing: the attestation relies on holder acks: %w", ResidualHolderTrust, ErrResidual)
	}
	return nil
}

func validResidualKind(k string) bool {
	if k == "" || len(k) > 64 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
