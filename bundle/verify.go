package bundle

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/translog"
)

// Options says what Verify checks beyond the export itself.
type Options struct {
	// AttestationKey and LogKey are the keys the verifier trusts, obtained
	// from the operator out of band. When nil or empty, the keys inside the
	// export are used, and the report says so: an export then proves only
	// that it is consistent with itself.
	AttestationKey ed25519.PublicKey
	LogKey         string
	// Subject and Salt, when set, open the subject commitment.
	Subject string
	Salt    []byte
	// Saved, when set, is a checkpoint of the same log the verifier saved
	// earlier: the export's checkpoint must extend it (the same tree, or a
	// consistency proof in the export from its size), so a rewritten or
	// forked log is detected.
	Saved []byte
	// Witnesses, when set, are the witnesses the verifier trusts
	// (cosignature/v1 verifiers, translog.NewCosignatureVerifier): the
	// export's checkpoint must carry valid cosignatures of at least
	// WitnessesRequired of them (translog.CheckCosignatures).
	Witnesses         []note.Verifier
	WitnessesRequired int
}

// Report is what Verify established.
type Report struct {
	Forget         string
	Commitment     string
	Origin         string
	TreeSize       int64
	KeysFromExport bool   // the keys were taken from the export, not given
	KeyLink        string // how the key_created entry is tied to the subject
	Entries        []string
	SubjectChecked bool
	Consistent     string // with the saved checkpoint: "" when none was given
	// Witnessed says which trusted witnesses cosigned the checkpoint; nil
	// when no witness was given.
	Witnessed *translog.WitnessReport
}

// Verify checks an export offline: the attestation's signature and
// content (attest.Open); the log checkpoint's signature by the log key;
// every entry's inclusion proof against that one checkpoint and every
// entry's signature by the service key; that the entries are those of this
// forget — forget committed, erasure attested with the attestation's exact
// SHA-256, the key created (when the forget names one), each holder ack of
// the attestation, the epoch of the key evidence — in log order; the
// subject commitment when a subject and salt are given; and consistency
// with a saved checkpoint when one is given. The error wraps ErrVerify (or
// ErrFormat), with the failing check's own error.
func Verify(b *Bundle, opts Options) (*Report, error) {
	fail := func(format string, a ...any) (*Report, error) {
		return nil, fmt.Errorf("bundle: "+format+": %w", append(a, ErrVerify)...)
	}
	rep := &Report{Forget: b.Forget}
	pub := opts.AttestationKey
	vkey := strings.TrimSpace(opts.LogKey)
	if pub == nil || vkey == "" {
		rep.KeysFromExport = true
	}
	if pub == nil {
		p, err := attest.ParsePublicKey(b.AttestationPub)
		if err != nil {
			return fail("%s: %v", FileAttestationPub, err)
		}
		pub = p
	}
	if vkey == "" {
		vkey = strings.TrimSpace(string(b.LogKey))
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return fail("log key: %v", err)
	}

	// 1. The attestation.
	st, err := attest.Open(b.Attestation, pub)
	if err != nil {
		return fail("%s: %w", FileAttestation, err)
	}
	pred := st.Predicate
	if pred.Forget != b.Forget {
		return fail("%s is about forget %s, the export about %s", FileAttestation, pred.Forget, b.Forget)
	}
	rep.Commitment = st.Commitment()
	if opts.Subject != "" || opts.Salt != nil {
		if err := st.CheckSubject(opts.Subject, opts.Salt); err != nil {
			return fail("subject: %w", err)
		}
		rep.SubjectChecked = true
	}

	// 2. The checkpoint, and every entry in it.
	cp, err := translog.OpenCheckpoint(b.Checkpoint, verifier)
	if err != nil {
		return fail("%s: %w", FileCheckpoint, err)
	}
	rep.Origin, rep.TreeSize = cp.Origin, cp.Size
	if len(opts.Witnesses) > 0 || opts.WitnessesRequired > 0 {
		if _, rep.Witnessed, err = translog.CheckCosignatures(b.Checkpoint, verifier, opts.Witnesses, opts.WitnessesRequired); err != nil {
			return fail("%s: %w", FileCheckpoint, err)
		}
	}
	events := map[string][]*attest.Event{}
	index := map[*attest.Event]int64{}
	for _, e := range b.Entries {
		name := e.EntryName()
		p, err := translog.ParseProof(e.Proof)
		if err != nil {
			return fail("%s.tlog-proof: %w", name, err)
		}
		if p.Index != e.Index {
			return fail("%s.tlog-proof proves index %d", name, p.Index)
		}
		if !bytes.Equal(p.Checkpoint, b.Checkpoint) {
			return fail("%s.tlog-proof is against another checkpoint than %s", name, FileCheckpoint)
		}
		if _, err := translog.CheckProof(e.Proof, e.Data, verifier); err != nil {
			return fail("%s: %w", name, err)
		}
		ev, err := attest.OpenEvent(e.Data, pub)
		if err != nil {
			return fail("%s.json: %w", name, err)
		}
		if ev.Event != e.Event {
			return fail("%s.json holds a %s event", name, ev.Event)
		}
		events[ev.Event] = append(events[ev.Event], ev)
		index[ev] = e.Index
		rep.Entries = append(rep.Entries, name)
	}
	one := func(kind string) (*attest.Event, error) {
		if n := len(events[kind]); n != 1 {
			return nil, fmt.Errorf("bundle: %d %s entries, want 1: %w", n, kind, ErrVerify)
		}
		return events[kind][0], nil
	}

	// 3. The entries are this forget's.
	fc, err := one(attest.EventForgetCommitted)
	if err != nil {
		return nil, err
	}
	if fc.Forget.Forget != b.Forget || fc.Forget.Subject != rep.Commitment {
		return fail("the forget_committed entry is about another forget or commitment")
	}
	ea, err := one(attest.EventErasureAttested)
	if err != nil {
		return nil, err
	}
	if ea.Attested.Forget != b.Forget || ea.Attested.Subject != rep.Commitment || ea.Attested.AttestationSHA256 != attest.Digest(b.Attestation) {
		return fail("the erasure_attested entry does not name this attestation (forget, commitment or SHA-256 differ)")
	}
	if index[ea] <= index[fc] {
		return fail("the attestation was logged before the forget committed")
	}
	switch kc := events[attest.EventKeyCreated]; {
	case fc.Forget.KeyCreated < 0 && len(kc) == 0:
		rep.KeyLink = "the subject had no logged key"
	case fc.Forget.KeyCreated < 0 || len(kc) != 1 || index[kc[0]] != fc.Forget.KeyCreated:
		return fail("the key_created entry is not the one the forget_committed entry names (index %d)", fc.Forget.KeyCreated)
	case kc[0].Key.Generation != fc.Forget.Generation:
		return fail("the key_created entry is of generation %d, the forget destroyed %d", kc[0].Key.Generation, fc.Forget.Generation)
	case kc[0].Key.Subject == rep.Commitment:
		rep.KeyLink = "same subject commitment, and named by index by the forget"
		if index[kc[0]] >= index[fc] {
			return fail("the key was logged as created after its forget")
		}
	default:
		rep.KeyLink = "named by index by the forget (its commitment uses another salt: the key was unreachable when the forget was made)"
	}
	if len(events[attest.EventKeyCreated]) > 1 {
		return fail("more than one key_created entry")
	}
	acks := events[attest.EventHolderAck]
	if len(acks) != len(pred.HolderAcks) {
		return fail("%d holder_ack entries for the attestation's %d holder acks", len(acks), len(pred.HolderAcks))
	}
	for _, h := range pred.HolderAcks {
		want := attest.NewAckEvent(b.Forget, h)
		found := slices.ContainsFunc(acks, func(ev *attest.Event) bool {
			a := ev.Ack
			return a.Forget == want.Forget && a.Holder == want.Holder && a.PublicKey.Equal(want.PublicKey) &&
				a.Artifacts == want.Artifacts && a.MessageSHA256 == want.MessageSHA256 && bytes.Equal(a.Signature, want.Signature) &&
				index[ev] > index[fc] && index[ev] < index[ea]
		})
		if !found {
			return fail("holder %s's ack is not logged between the forget's commit and its attestation", h.Holder)
		}
	}
	if ke := pred.KeyEvidence; ke.Epoch > 0 {
		ep, err := one(attest.EventEpochCompleted)
		if err != nil {
			return nil, err
		}
		if ep.Epoch.Epoch != ke.Epoch || !slices.Equal(ep.Epoch.Retired, ke.RetiredRootVersions) ||
			index[ep] <= index[fc] || index[ep] >= index[ea] {
			return fail("the epoch_completed entry is not the attestation's epoch %d, logged between the commit and the attestation", ke.Epoch)
		}
	} else if len(events[attest.EventEpochCompleted]) != 0 {
		return fail("an epoch_completed entry for an attestation without an epoch")
	}

	// 4. A saved checkpoint: the export's log extends it.
	if opts.Saved != nil {
		old, err := translog.OpenCheckpoint(opts.Saved, verifier)
		if err != nil {
			return fail("saved checkpoint: %w", err)
		}
		switch {
		case old.Size > cp.Size:
			return fail("the saved checkpoint (size %d) is newer than the export's (size %d): ask for a new export with since=%d", old.Size, cp.Size, old.Size)
		case old.Size == cp.Size:
			if old.Hash != cp.Hash {
				return fail("the saved checkpoint and the export's have the same size %d and different trees: the log was forked or rewritten", cp.Size)
			}
		default:
			if b.Consistency == nil {
				return fail("no %s in the export: ask for one with since=%d", FileConsistency, old.Size)
			}
			p, err := translog.ParseConsistencyProof(b.Consistency)
			if err != nil {
				return fail("%s: %w", FileConsistency, err)
			}
			if p.Old != old.Size || p.New != cp.Size {
				return fail("%s goes from size %d to %d, not from the saved %d to the export's %d", FileConsistency, p.Old, p.New, old.Size, cp.Size)
			}
			if err := translog.CheckConsistency(old, cp, p.Hashes); err != nil {
				return fail("the export's log does not extend the saved checkpoint (rewritten or forked): %w", err)
			}
		}
		rep.Consistent = fmt.Sprintf("extends the saved checkpoint of size %d", old.Size)
	}
	return rep, nil
}
