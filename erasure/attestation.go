package erasure

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/registry"
)

// Evidence is what proves the erasures an Eraser completed, to anyone who
// does not trust the service: the signed attestation of a forget, the
// regulator export with its log entries and proofs, and the transparency
// log they are logged in.
type Evidence struct {
	*core
	forgets *Eraser // for the error of an attestation of a forget it cannot read
}

var _ shredd.Evidence = (*Evidence)(nil)

// NewEvidence returns the evidence of the forgets of e, over the same
// database, key tree and journal.
func NewEvidence(e *Eraser) *Evidence { return &Evidence{core: e.core, forgets: e} }

// Attestation returns the erasure attestation file of an erased forget
// (docs/attestation.md): the JSON of a DSSE envelope around an in-toto
// Statement about the salted commitment to the subject id, with the
// timeline, the key evidence, every artifact of the lineage and how it was
// closed, the holders' signed acks, the five conditions with their
// evidence, and the residuals. With a Journal, it was signed (and its
// digest logged) when the forget was erased, and these exact bytes are
// returned; otherwise it is signed now (core.signer). A forget that is not
// erased gives ErrNotErased.
func (s *Evidence) Attestation(ctx context.Context, id shredd.ID) ([]byte, error) {
	id, err := resolveAlias(ctx, s.db, id) // an alias: the kept forget's
	if err != nil {
		return nil, err
	}
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, id[:]))
	if err != nil {
		if _, gerr := s.forgets.GetForget(ctx, id); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("erasure: attestation: %w", err)
	}
	if !r.erased.Valid {
		return nil, fmt.Errorf("erasure: forget %s is %s: %w", id, r.state, shredd.ErrNotErased)
	}
	var stored []byte
	if err := s.db.QueryRowContext(ctx, `SELECT attestation FROM forgets WHERE id=?`, id[:]).Scan(&stored); err != nil {
		return nil, fmt.Errorf("erasure: attestation: %w", err)
	}
	if stored != nil {
		return stored, nil
	}
	// The conditions as proven at erasure, not recomputed: a later event
	// (another holder's inventory) does not unsay a completed proof.
	conds, err := s.proofOf(ctx, id)
	if err != nil {
		return nil, err
	}
	env, _, err := s.signAttestation(ctx, r, conds)
	if err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// errNoSigner is the error of an attestation to sign without a signer.
var errNoSigner = fmt.Errorf("erasure: attestation: no signer (no journal and no Options.Signer): %w", shredd.ErrUnavailable)

// signer is the one signer of the attestations: the Journal's, which signs
// its events, else Options.Signer; nil when there is neither.
func (c *core) signer() *attest.Signer {
	if c.opts.Journal != nil {
		return c.opts.Journal.Signer()
	}
	return c.opts.Signer
}

// signAttestation builds the attestation of forget r, erased (r.erased
// set) with the verification conds, has the signer sign it, and returns it
// with the subject commitment it is about.
func (c *core) signAttestation(ctx context.Context, r forgetRow, conds []shredd.Condition) (attest.Envelope, string, error) {
	signer := c.signer()
	if signer == nil {
		return attest.Envelope{}, "", errNoSigner
	}
	id := r.id
	var commitment string
	if err := c.db.QueryRowContext(ctx, `SELECT coalesce(commitment, '') FROM forgets WHERE id=?`, id[:]).Scan(&commitment); err != nil {
		return attest.Envelope{}, "", fmt.Errorf("erasure: attestation: %w", err)
	}
	if commitment == "" {
		return attest.Envelope{}, "", fmt.Errorf("erasure: forget %s has no subject commitment (made by an older release): %w", id, shredd.ErrNotErased)
	}
	p := attest.Predicate{
		Forget: id.String(),
		Claim:  attest.Claim,
		Timeline: attest.Timeline{Requested: time.Unix(0, r.requested).UTC(), Committed: ts(r.committed),
			Shredded: ts(r.shredded), Erased: ts(r.erased)},
	}
	for _, c := range conds {
		p.Conditions = append(p.Conditions, attest.Condition{Name: c.Name, Status: c.Status, Evidence: c.Reason})
	}
	if err := c.keyEvidence(ctx, r, &p.KeyEvidence); err != nil {
		return attest.Envelope{}, "", err
	}
	collateral, err := c.lineageArtifacts(ctx, r, &p)
	if err != nil {
		return attest.Envelope{}, "", err
	}
	p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualRootStoreSnapshots, Description: c.snapshotResidual()})
	if r.gen.Valid && r.gen.Int64 == 0 {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualNoKeyIssued,
			Description: "no key was ever issued for this subject: nothing was sealed under a key of its own, and none was destroyed; the tombstone written by the forget refuses every later encrypt, decrypt or registration of the subject"})
	}
	if collateral > 0 {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualCollateralAggregates,
			Description: fmt.Sprintf("%d aggregates of the lineage also carried other subjects; they are unreadable for those subjects too and must be rebuilt by their holders", collateral)})
	}
	if len(p.HolderAcks) > 0 {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualHolderTrust,
			Description: fmt.Sprintf("%d plaintext-held artifacts are closed by their holders' signed acks (and, for holders that answer probes, signed probe answers): the acks and the answers prove what the holders declared and what they said their retrieval paths returned when they answered, not what their storage holds", countHeldAcked(p.Artifacts))})
	}
	if err := c.probeEvidence(ctx, id, &p); err != nil {
		return attest.Envelope{}, "", err
	}
	if err := c.readResiduals(ctx, r, &p); err != nil {
		return attest.Envelope{}, "", err
	}
	stream := c.opts.MarkStream
	if stream == "" {
		stream = registry.MarkStream
	}
	lost, err := registry.LostRegistrations(ctx, c.keys.Root(), stream)
	if err != nil {
		return attest.Envelope{}, "", fmt.Errorf("erasure: attestation: %w", err)
	}
	for _, l := range lost {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualLostRegistrations,
			Description: fmt.Sprintf("registrations %s acknowledged by shredd were lost and the loss was accepted at %s (shredd wal accept-loss): artifacts among them, whose lineage shredd no longer knows, may carry this subject and are outside this proof",
				l, time.Unix(0, l.AcceptedAt).UTC().Format(time.RFC3339))})
	}
	env, err := signer.Sign(attest.NewStatement(commitment, p))
	if err != nil {
		return attest.Envelope{}, "", fmt.Errorf("erasure: attestation: %w", err)
	}
	return env, commitment, nil
}

// probeEvidence adds the probes that closed the holders' artifacts
// (attestationProbes) and states the holders closed by their acks alone.
func (c *core) probeEvidence(ctx context.Context, id shredd.ID, p *attest.Predicate) error {
	probes, err := c.attestationProbes(ctx, id)
	if err != nil {
		return fmt.Errorf("erasure: attestation: %w", err)
	}
	p.Probes = probes
	probed := map[string]bool{}
	for _, pr := range probes {
		probed[pr.Holder] = true
	}
	var alone []string
	for _, a := range p.HolderAcks {
		if !probed[a.Holder] && !slices.Contains(alone, a.Holder) {
			alone = append(alone, a.Holder)
		}
	}
	if len(alone) > 0 {
		slices.Sort(alone)
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualAckOnlyHolders,
			Description: fmt.Sprintf("%d holders answer no probes (%s): their artifacts are closed by their signed acks alone, and nothing asked their retrieval paths (index, caches, replicas) whether they still return them",
				len(alone), strings.Join(alone, ", "))})
	}
	return nil
}

// readResiduals states what the attestation of forget r cannot rule out
// about reads: flows shredd does not observe (always), and the writes
// declared independent of reads of the lineage.
func (c *core) readResiduals(ctx context.Context, r forgetRow, p *attest.Predicate) error {
	p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualUnobservedReads,
		Description: "shredd observes reads through its decrypt (leases) and the writes of the same reader (the token, or the holder it is bound to) while a read is attributable (until its lease expires, released or not); " +
			"plaintext a writer kept past its lease, obtained outside shredd or passed to another token or process is not observed, and what was derived from it is in this lineage only where its writer declared it"})
	reads, err := c.reg.ReadsOfLineage(ctx, r.sid, r.committed.Int64)
	if err != nil {
		return fmt.Errorf("erasure: attestation: %w", err)
	}
	if indep := reads.Independent(); len(indep) > 0 {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualIndependentWrites,
			Description: fmt.Sprintf("%d artifacts were written while their writers held reads of this lineage and declared independent of those reads by their writers (%s): "+
				"they are not in the lineage and stay readable; that they derive nothing from the subject's data rests on those declarations", len(indep), someIDs(indep))})
	}
	if erased := r.erased.Int64; reads.AttributableUntil > erased {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualReadsAttributable,
			Description: fmt.Sprintf("reads of this lineage (released leases) stay attributable to their readers until %s, after this attestation: "+
				"what those readers write until then in another unit of work or declared independent of them is not listed here (the forget's dry run lists it)",
				time.Unix(0, reads.AttributableUntil).UTC().Format(time.RFC3339))})
	}
	if len(reads.Separate) > 0 {
		p.Residuals = append(p.Residuals, attest.Residual{Kind: attest.ResidualSeparateWrites,
			Description: fmt.Sprintf("%d artifacts were written by the readers of this lineage while their reads were attributable, in another unit of work or under another holder name (%s): "+
				"their writes did not answer for those reads, they are not in the lineage and stay readable; that they are separate rests on their writers' units", len(reads.Separate), someIDs(reads.Separate))})
	}
	return nil
}

// someIDs is the first 20 of ids, and how many more there are.
func someIDs(ids []shredd.ID) string {
	listed := make([]string, 0, 20)
	for _, id := range ids[:min(len(ids), 20)] {
		listed = append(listed, id.String())
	}
	if len(ids) > len(listed) {
		return fmt.Sprintf("%s and %d more", strings.Join(listed, ", "), len(ids)-len(listed))
	}
	return strings.Join(listed, ", ")
}

func countHeldAcked(as []attest.Artifact) int {
	n := 0
	for _, a := range as {
		if a.ClosedBy == attest.ClosedHolderAck {
			n++
		}
	}
	return n
}

func (c *core) snapshotResidual() string {
	if c.keys.Root().Kind() == "local" {
		return "copies of the local root key file (root.key) taken before the epoch's trim, and old blocks of that file that journaling or copy-on-write storage keeps, can still open database backups taken before the forget; keep no root file copies older than one epoch"
	}
	return "Vault snapshots (Raft snapshots or storage backups) taken before the epoch's trim still hold the destroyed root key versions (or the deleted subject key); the erasure's horizon is their retention"
}

func (c *core) keyEvidence(ctx context.Context, r forgetRow, k *attest.KeyEvidence) error {
	root := c.keys.Root()
	switch {
	case c.keys.PerSubject():
		k.RootStore = attest.RootStoreVaultTransitPerSubject
	case root.Kind() == "local":
		k.RootStore = attest.RootStoreLocal
	default:
		k.RootStore = attest.RootStoreVaultTransit
	}
	// The root store asked now, not this node's last read of it (on many
	// nodes another node ran the epoch): a Vault root store's description
	// is the key configuration this read returned.
	if _, err := c.shred.RootVersions(ctx); err != nil {
		return fmt.Errorf("erasure: attestation: %w", err)
	}
	if d := root.Describe(); d.Name != "" {
		k.RootKeyConfig = &attest.RootKeyConfig{Name: d.Name, Type: d.Type, Exportable: d.Exportable, AllowPlaintextBackup: d.AllowPlaintextBackup,
			MinAvailableVersion: d.MinAvailableVersion, LatestVersion: d.LatestVersion}
	}
	if c.keys.PerSubject() {
		return nil
	}
	e, err := c.shred.EpochByID(ctx, r.epoch.Int64)
	if err != nil {
		return fmt.Errorf("erasure: attestation: %w", err)
	}
	k.Epoch, k.RetiredRootVersions = e.ID, e.Retired
	if k.RetiredRootVersions == nil {
		k.RetiredRootVersions = []int{}
	}
	return nil
}

// ackSignatures returns the signature of the holder's ack that closed
// each artifact of forget id.
func (c *core) ackSignatures(ctx context.Context, id shredd.ID) (map[shredd.ID][]byte, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT k.artifact, h.signature FROM acked k JOIN holder_acks h ON h.id = k.ack WHERE k.forget = ?`, id[:])
	if err != nil {
		return nil, fmt.Errorf("erasure: attestation: %w", err)
	}
	defer rows.Close()
	out := map[shredd.ID][]byte{}
	for rows.Next() {
		var art, sig []byte
		if err := rows.Scan(&art, &sig); err != nil {
			return nil, fmt.Errorf("erasure: attestation: %w", err)
		}
		var a shredd.ID
		copy(a[:], art)
		out[a] = sig
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: attestation: %w", err)
	}
	return out, nil
}

// lineageArtifacts lists every artifact of the lineage with how it was
// closed, and the holders' acks; it returns the number of collateral
// aggregates (artifacts that also carry other subjects).
func (c *core) lineageArtifacts(ctx context.Context, r forgetRow, p *attest.Predicate) (int, error) {
	if err := c.reg.Settle(ctx); err != nil { // the lineage by subject
		return 0, fmt.Errorf("erasure: attestation: %w", err)
	}
	deps, err := c.reg.SubjectArtifacts(ctx, r.sid)
	if err != nil {
		return 0, fmt.Errorf("erasure: attestation: %w", err)
	}
	slices.SortFunc(deps, func(a, b registry.Dependent) int { return cmp.Compare(a.Seq, b.Seq) })
	sigs, err := c.ackSignatures(ctx, r.id)
	if err != nil {
		return 0, err
	}
	collateral := 0
	for _, d := range deps {
		a := attest.Artifact{ID: d.ID.String(), Kind: d.Kind, Holder: d.Holder}
		if d.Sealed {
			a.ClosedBy = attest.ClosedSealedKeyDestroyed
		} else {
			a.ClosedBy, a.AckSignature = attest.ClosedHolderAck, sigs[d.ID]
		}
		if d.Others > 0 {
			collateral++
		}
		p.Artifacts = append(p.Artifacts, a)
	}
	// The acks that closed something, each with exactly the artifacts it
	// signed.
	ar, err := c.db.QueryContext(ctx, `SELECT h.holder, h.artifacts, h.signature, o.public_key FROM holder_acks h
		JOIN holders o ON o.id = h.holder
		WHERE h.forget = ? AND EXISTS (SELECT 1 FROM acked k WHERE k.ack = h.id) ORDER BY h.id`, r.id[:])
	if err != nil {
		return 0, fmt.Errorf("erasure: attestation: %w", err)
	}
	defer ar.Close()
	for ar.Next() {
		var h attest.HolderAck
		var arts string
		if err := ar.Scan(&h.Holder, &arts, &h.Signature, &h.PublicKey); err != nil {
			return 0, fmt.Errorf("erasure: attestation: %w", err)
		}
		h.Artifacts = strings.Split(arts, ",")
		p.HolderAcks = append(p.HolderAcks, h)
	}
	if p.HolderAcks == nil {
		p.HolderAcks = []attest.HolderAck{}
	}
	return collateral, ar.Err()
}
