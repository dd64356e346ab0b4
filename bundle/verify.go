package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

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
	// WitnessKeys, when set, are the witnesses the verifier trusts: each
	// a cosignature/v1 verifier key file, or the key itself, read
	// strictly (CheckWitnessKeyFile; two with one public key are
	// witness.duplicate). The export's checkpoint must carry valid
	// cosignatures of at least WitnessesRequired of them (0: all).
	WitnessKeys       [][]byte
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

// CheckExport is the whole of `shredd verify EXPORT.tar.gz`: the
// verifier's own inputs (both key files, a subject and a salt both or
// neither; else ErrUsage), the key files read strictly
// (CheckPublicKeyFile, CheckLogKeyFile), then Read and Verify.
// opts' AttestationKey and LogKey are ignored. The error is an *Error:
// Reason names the first rule of the spec the input breaks.
func CheckExport(export, keyFile, logKeyFile []byte, opts Options) (*Report, error) {
	opts.AttestationKey, opts.LogKey = nil, ""
	// The verifier's own inputs first: a usage error checks nothing.
	if err := checkInputs(keyFile, logKeyFile, opts.Subject, opts.Salt); err != nil {
		return nil, err
	}
	if r := opts.WitnessesRequired; r < 0 || r > len(opts.WitnessKeys) {
		return nil, usageError("%d witnesses required: want 1 to the %d witness keys given", r, len(opts.WitnessKeys))
	}
	k, err := CheckPublicKeyFile(keyFile)
	if err != nil {
		return nil, err
	}
	opts.AttestationKey = ed25519.PublicKey(k)
	if opts.LogKey, err = CheckLogKeyFile(logKeyFile); err != nil {
		return nil, err
	}
	if _, err := witnessKeys(opts.WitnessKeys); err != nil { // the count was checked above
		return nil, err
	}
	b, err := ReadBytes(export)
	if err != nil {
		return nil, err
	}
	return Verify(b, opts)
}

// Verify checks an export offline, in the order of the spec: the export's
// own key files; the attestation's JSON, envelope, signature and content
// (attest.Open); the subject commitment when a subject and salt are given;
// the log checkpoint's signature by the log key; every entry's inclusion
// proof against that one checkpoint and every entry's signature by the
// service key; that the entries are those of this forget — forget
// committed, erasure attested with the attestation's exact SHA-256, the
// key created (when the forget names one), each holder ack of the
// attestation, the epoch of the key evidence — in log order; and
// consistency with a saved checkpoint when one is given. The error is an
// *Error wrapping ErrVerify (or ErrFormat), with the failing check's own
// error.
func Verify(b *Bundle, opts Options) (*Report, error) {
	rep := &Report{Forget: b.Forget}
	witnesses, err := witnessOptions(opts)
	if err != nil {
		return nil, err
	}
	pub, verifier, err := verifierKeys(b, opts, rep)
	if err != nil {
		return nil, err
	}
	// 1. The attestation.
	pred, err := checkAttestation(b, pub, opts, rep)
	if err != nil {
		return nil, err
	}
	// 2. The checkpoint, and every entry in it.
	cp, err := checkCheckpoint(b, verifier, witnesses, opts.WitnessesRequired, rep)
	if err != nil {
		return nil, err
	}
	log, err := checkInclusions(b, cp, pub, rep)
	if err != nil {
		return nil, err
	}
	// 3. The entries are this forget's.
	if err := checkForgetEntries(b, pred, log, rep); err != nil {
		return nil, err
	}
	// 4. A saved checkpoint: the export's log extends it.
	if opts.Saved != nil {
		if err := checkSaved(b, cp, verifier, opts.Saved, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// witnessOptions reads the witness keys given (witnessKeys) and checks
// the number required is 0 (all) or 1 to their number.
func witnessOptions(opts Options) ([]keyLine, error) {
	witnesses, err := witnessKeys(opts.WitnessKeys)
	if err != nil {
		return nil, err
	}
	if r := opts.WitnessesRequired; r < 0 || r > len(witnesses) {
		return nil, usageError("%d witnesses required: want 1 to the %d witness keys given", r, len(witnesses))
	}
	return witnesses, nil
}

// verifierKeys returns the attestation key and the log key: the
// verifier's when given, else the export's own key files, read strictly.
// Keys are obtained out of band, so the export's are used only when the
// verifier gives none (and rep says so): a substituted key in the archive
// cannot make it verify.
func verifierKeys(b *Bundle, opts Options, rep *Report) (ed25519.PublicKey, keyLine, error) {
	pub := opts.AttestationKey
	vkey := opts.LogKey
	if pub == nil || vkey == "" {
		rep.KeysFromExport = true
	}
	if pub == nil {
		k, err := CheckPublicKeyFile(b.AttestationPub)
		if err != nil {
			return nil, keyLine{}, within(FileAttestationPub, err)
		}
		pub = ed25519.PublicKey(k)
	}
	if vkey == "" {
		k, err := CheckLogKeyFile(b.LogKey)
		if err != nil {
			return nil, keyLine{}, within(FileLogKey, err)
		}
		vkey = k
	}
	log, ok := parseKeyLine(vkey, noteAlgEd25519)
	if !ok {
		return nil, keyLine{}, formatError(ReasonLogKey, "log key: not a signed-note Ed25519 verifier key")
	}
	return pub, log, nil
}

// checkAttestation opens the attestation (envelope, signature, statement),
// checks it is about the export's forget, and opens the subject commitment
// when opts give a subject or salt. It returns the statement's predicate.
func checkAttestation(b *Bundle, pub ed25519.PublicKey, opts Options, rep *Report) (*attest.Predicate, error) {
	payload, err := openEnvelope(b.Attestation, pub, attest.PayloadType)
	if err != nil {
		return nil, within(FileAttestation, err)
	}
	st, err := parseStatement(payload)
	if err != nil {
		return nil, within(FileAttestation, err)
	}
	pred := &st.Predicate
	if pred.Forget != b.Forget {
		return nil, verifyError(ReasonStatementForget, nil, "%s is about forget %s, the export about %s", FileAttestation, pred.Forget, b.Forget)
	}
	rep.Commitment = st.Commitment()
	if opts.Subject != "" || opts.Salt != nil {
		if err := st.CheckSubject(opts.Subject, opts.Salt); err != nil {
			return nil, verifyError(ReasonSubject, err, "subject")
		}
		rep.SubjectChecked = true
	}
	return pred, nil
}

// checkCheckpoint opens the export's checkpoint with the log key and,
// when witnesses are given, checks its cosignatures: at least required
// of them valid (all when required is 0).
func checkCheckpoint(b *Bundle, log keyLine, witnesses []keyLine, required int, rep *Report) (translog.Checkpoint, error) {
	cp, text, sigs, err := openNote(b.Checkpoint, log, ReasonCheckpointFormat, ReasonCheckpointSignature, ReasonCheckpointOrigin)
	if err != nil {
		return translog.Checkpoint{}, within(FileCheckpoint, err)
	}
	rep.Origin, rep.TreeSize = cp.Origin, cp.Size
	if len(witnesses) > 0 {
		if required == 0 {
			required = len(witnesses)
		}
		rep.Witnessed = checkWitnesses(text, sigs, witnesses)
		if v := len(rep.Witnessed.Valid); v < required {
			var why []string
			if len(rep.Witnessed.Missing) > 0 {
				why = append(why, "none from "+strings.Join(rep.Witnessed.Missing, ", "))
			}
			if len(rep.Witnessed.Invalid) > 0 {
				why = append(why, "an invalid one from "+strings.Join(rep.Witnessed.Invalid, ", "))
			}
			return translog.Checkpoint{}, verifyError(ReasonCheckpointWitnesses, translog.ErrWitness, "%s: %d valid of the %d required (%s)", FileCheckpoint, v, required, strings.Join(why, "; "))
		}
	}
	return cp, nil
}

// loggedEvents are the export's entries, opened: by kind, in export order,
// and each one's index in the log.
type loggedEvents struct {
	events map[string][]*attest.Event
	index  map[*attest.Event]int64
}

// checkInclusions checks every entry of the export, in order
// (checkEntry), and returns them opened.
func checkInclusions(b *Bundle, cp translog.Checkpoint, pub ed25519.PublicKey, rep *Report) (*loggedEvents, error) {
	log := &loggedEvents{events: map[string][]*attest.Event{}, index: map[*attest.Event]int64{}}
	for i := range b.Entries {
		e := &b.Entries[i]
		ev, err := checkEntry(b, e, cp, pub)
		if err != nil {
			return nil, err
		}
		log.events[ev.Event] = append(log.events[ev.Event], ev)
		log.index[ev] = e.Index
		rep.Entries = append(rep.Entries, e.EntryName())
	}
	return log, nil
}

// checkEntry checks one entry: its inclusion proof is well formed, proves
// the entry's index against the export's checkpoint, and the entry is an
// event of its kind signed by the service key.
func checkEntry(b *Bundle, e *Entry, cp translog.Checkpoint, pub ed25519.PublicKey) (*attest.Event, error) {
	name := e.EntryName()
	if err := checkText(e.Proof); err != nil {
		return nil, within(name+".tlog-proof", err)
	}
	p, err := translog.ParseProof(e.Proof)
	if err != nil || p.Index > MaxSafeInteger {
		return nil, formatError(ReasonProofFormat, "%s.tlog-proof is malformed", name)
	}
	if p.Index != e.Index {
		return nil, verifyError(ReasonProofIndex, nil, "%s.tlog-proof proves index %d", name, p.Index)
	}
	if !bytes.Equal(p.Checkpoint, b.Checkpoint) {
		return nil, verifyError(ReasonProofCheckpoint, nil, "%s.tlog-proof is against another checkpoint than %s", name, FileCheckpoint)
	}
	if p.Index >= cp.Size || tlog.CheckRecord(p.Hashes, cp.Size, cp.Hash, p.Index, tlog.RecordHash(e.Data)) != nil {
		return nil, verifyError(ReasonProofInclusion, nil, "%s: entry %d not in tree %d of the checkpoint", name, p.Index, cp.Size)
	}
	ev, err := openEvent(e.Data, pub)
	if err != nil {
		return nil, within(name+".json", err)
	}
	if ev.Event != e.Event {
		return nil, verifyError(ReasonEventKind, nil, "%s.json holds a %s event", name, ev.Event)
	}
	return ev, nil
}

// entriesError is the error of an entry that is not this forget's.
func entriesError(format string, a ...any) error {
	return verifyError(ReasonEntries, nil, format, a...)
}

// one returns the single entry of the kind, or an error when there are
// none or several.
func (l *loggedEvents) one(kind string) (*attest.Event, error) {
	if n := len(l.events[kind]); n != 1 {
		return nil, verifyError(ReasonEntries, nil, "%d %s entries, want 1", n, kind)
	}
	return l.events[kind][0], nil
}

// checkForgetEntries checks that the entries are those of this forget, in
// log order: the forget committed, the erasure attested with the
// attestation's exact SHA-256 after it, the key created (checkKeyCreated),
// each holder ack (checkAcks), the epoch of the key evidence (checkEpoch).
func checkForgetEntries(b *Bundle, pred *attest.Predicate, log *loggedEvents, rep *Report) error {
	fc, err := log.one(attest.EventForgetCommitted)
	if err != nil {
		return err
	}
	if fc.Forget.Forget != b.Forget || fc.Forget.Subject != rep.Commitment {
		return entriesError("the forget_committed entry is about another forget or commitment")
	}
	ea, err := log.one(attest.EventErasureAttested)
	if err != nil {
		return err
	}
	if ea.Attested.Forget != b.Forget || ea.Attested.Subject != rep.Commitment || ea.Attested.AttestationSHA256 != attest.Digest(b.Attestation) {
		return entriesError("the erasure_attested entry does not name this attestation (forget, commitment or SHA-256 differ)")
	}
	if log.index[ea] <= log.index[fc] {
		return entriesError("the attestation was logged before the forget committed")
	}
	if err := checkKeyCreated(fc, log, rep); err != nil {
		return err
	}
	if err := checkAcks(b, pred, fc, ea, log); err != nil {
		return err
	}
	return checkEpoch(pred, fc, ea, log)
}

// checkKeyCreated checks the key_created entry is the one the
// forget_committed entry fc names, of the destroyed generation, and sets
// how it is tied to the subject (rep.KeyLink).
func checkKeyCreated(fc *attest.Event, log *loggedEvents, rep *Report) error {
	switch kc := log.events[attest.EventKeyCreated]; {
	case fc.Forget.KeyCreated < 0 && len(kc) == 0:
		rep.KeyLink = "the subject had no logged key"
	case fc.Forget.KeyCreated < 0 || len(kc) != 1 || log.index[kc[0]] != fc.Forget.KeyCreated:
		return entriesError("the key_created entry is not the one the forget_committed entry names (index %d)", fc.Forget.KeyCreated)
	case kc[0].Key.Generation != fc.Forget.Generation:
		return entriesError("the key_created entry is of generation %d, the forget destroyed %d", kc[0].Key.Generation, fc.Forget.Generation)
	case kc[0].Key.Subject == rep.Commitment:
		rep.KeyLink = "same subject commitment, and named by index by the forget"
		if log.index[kc[0]] >= log.index[fc] {
			return entriesError("the key was logged as created after its forget")
		}
	default:
		rep.KeyLink = "named by index by the forget (its commitment uses another salt: the key was unreachable when the forget was made)"
	}
	if len(log.events[attest.EventKeyCreated]) > 1 {
		return entriesError("more than one key_created entry")
	}
	return nil
}

// checkAcks checks there is one holder_ack entry for each of the
// attestation's holder acks, logged between the forget's commit fc and
// its attestation ea.
func checkAcks(b *Bundle, pred *attest.Predicate, fc, ea *attest.Event, log *loggedEvents) error {
	acks := log.events[attest.EventHolderAck]
	if len(acks) != len(pred.HolderAcks) {
		return entriesError("%d holder_ack entries for the attestation's %d holder acks", len(acks), len(pred.HolderAcks))
	}
	for _, h := range pred.HolderAcks {
		want := attest.NewAckEvent(b.Forget, h)
		found := slices.ContainsFunc(acks, func(ev *attest.Event) bool {
			a := ev.Ack
			return a.Forget == want.Forget && a.Holder == want.Holder && a.PublicKey.Equal(want.PublicKey) &&
				a.Artifacts == want.Artifacts && a.MessageSHA256 == want.MessageSHA256 && bytes.Equal(a.Signature, want.Signature) &&
				log.index[ev] > log.index[fc] && log.index[ev] < log.index[ea]
		})
		if !found {
			return entriesError("holder %s's ack is not logged between the forget's commit and its attestation", h.Holder)
		}
	}
	return nil
}

// checkEpoch checks the epoch_completed entry is the key evidence's epoch,
// logged between the forget's commit fc and its attestation ea, or that
// there is none when the key evidence names no epoch.
func checkEpoch(pred *attest.Predicate, fc, ea *attest.Event, log *loggedEvents) error {
	ke := pred.KeyEvidence
	if ke.Epoch <= 0 {
		if len(log.events[attest.EventEpochCompleted]) != 0 {
			return entriesError("an epoch_completed entry for an attestation without an epoch")
		}
		return nil
	}
	ep, err := log.one(attest.EventEpochCompleted)
	if err != nil {
		return err
	}
	if ep.Epoch.Epoch != ke.Epoch || !slices.Equal(ep.Epoch.Retired, ke.RetiredRootVersions) ||
		log.index[ep] <= log.index[fc] || log.index[ep] >= log.index[ea] {
		return entriesError("the epoch_completed entry is not the attestation's epoch %d, logged between the commit and the attestation", ke.Epoch)
	}
	return nil
}

// checkSaved checks the export's log extends the saved checkpoint: the
// same tree, or a consistency proof in the export from the saved size to
// the checkpoint cp.
func checkSaved(b *Bundle, cp translog.Checkpoint, log keyLine, saved []byte, rep *Report) error {
	old, _, _, err := openNote(saved, log, ReasonSavedFormat, ReasonSavedSignature, ReasonSavedOrigin)
	if err != nil {
		return within("saved checkpoint", err)
	}
	switch {
	case old.Size > cp.Size:
		return verifyError(ReasonConsistencyNewer, nil, "the saved checkpoint (size %d) is newer than the export's (size %d): ask for a new export with since=%d", old.Size, cp.Size, old.Size)
	case old.Size == cp.Size:
		if old.Hash != cp.Hash {
			return verifyError(ReasonConsistencyFork, nil, "the saved checkpoint and the export's have the same size %d and different trees: the log was forked or rewritten", cp.Size)
		}
	default:
		if err := checkConsistency(b, old, cp); err != nil {
			return err
		}
	}
	rep.Consistent = fmt.Sprintf("extends the saved checkpoint of size %d", old.Size)
	return nil
}

// checkConsistency checks the export's consistency proof goes from the
// saved checkpoint old to the export's cp, and holds.
func checkConsistency(b *Bundle, old, cp translog.Checkpoint) error {
	if b.Consistency == nil {
		return verifyError(ReasonConsistencyNone, nil, "no %s in the export: ask for one with since=%d", FileConsistency, old.Size)
	}
	if err := checkText(b.Consistency); err != nil {
		return within(FileConsistency, err)
	}
	p, err := translog.ParseConsistencyProof(b.Consistency)
	if err != nil || p.New > MaxSafeInteger {
		return formatError(ReasonConsistencyFormat, "%s is malformed", FileConsistency)
	}
	if p.Old != old.Size || p.New != cp.Size {
		return verifyError(ReasonConsistencyRange, nil, "%s goes from size %d to %d, not from the saved %d to the export's %d", FileConsistency, p.Old, p.New, old.Size, cp.Size)
	}
	if err := translog.CheckConsistency(old, cp, p.Hashes); err != nil {
		return verifyError(ReasonConsistencyFork, err, "the export's log does not extend the saved checkpoint (rewritten or forked)")
	}
	return nil
}

// openEnvelope reads a DSSE envelope strictly: CheckJSON, then the
// canonical form (json.schema), then attest's envelope checks.
func openEnvelope(data []byte, pub ed25519.PublicKey, payloadType string) ([]byte, error) {
	if err := CheckJSON(data); err != nil {
		return nil, err
	}
	var env attest.Envelope
	if err := attest.DecodeStrict(data, &env); err != nil {
		return nil, formatError(ReasonJSONSchema, "envelope: %v", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, formatError(ReasonJSONSyntax, "envelope: %v", err)
	}
	if canon, err := json.Marshal(&env); err != nil || !bytes.Equal(canon, compact.Bytes()) {
		return nil, formatError(ReasonJSONSchema, "envelope is not in canonical form")
	}
	if env.PayloadType != payloadType || len(env.Signatures) != 1 {
		return nil, formatError(ReasonEnvelopeFormat, "envelope: payload type or number of signatures")
	}
	sig := env.Signatures[0]
	if sig.KeyID != attest.KeyID(pub) || !ed25519.Verify(pub, attest.PAE(env.PayloadType, env.Payload), sig.Sig) {
		return nil, verifyError(ReasonEnvelopeSignature, nil, "the envelope is not signed by the key (key id %s)", attest.KeyID(pub))
	}
	return env.Payload, nil
}

// parseStatement is attest.ParseStatement with the spec's reason codes.
func parseStatement(payload []byte) (*attest.Statement, error) {
	if err := CheckJSON(payload); err != nil {
		return nil, err
	}
	var s attest.Statement
	if err := attest.DecodeStrict(payload, &s); err != nil {
		return nil, formatError(ReasonJSONSchema, "statement: %v", err)
	}
	if canon, err := s.Marshal(); err != nil || !bytes.Equal(canon, payload) {
		return nil, formatError(ReasonJSONSchema, "statement is not in canonical form")
	}
	if err := s.Validate(); err != nil {
		reason := ReasonStatementFormat
		for _, c := range []struct {
			err    error
			reason string
		}{
			{attest.ErrClaim, ReasonStatementClaim}, {attest.ErrCondition, ReasonStatementConditions},
			{attest.ErrTimeline, ReasonStatementTimeline}, {attest.ErrKeyEvidence, ReasonStatementKeyEvidence},
			{attest.ErrAck, ReasonStatementAcks}, {attest.ErrResidual, ReasonStatementResiduals}, {attest.ErrProbe, ReasonStatementProbes},
		} {
			if errors.Is(err, c.err) {
				reason = c.reason
			}
		}
		return nil, verifyError(reason, err, "%s", FileAttestation)
	}
	return &s, nil
}

// openEvent is attest.OpenEvent with the spec's reason codes.
func openEvent(entry []byte, pub ed25519.PublicKey) (*attest.Event, error) {
	payload, err := openEnvelope(entry, pub, attest.EventPayloadType)
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(payload); err != nil {
		return nil, err
	}
	var ev attest.Event
	if err := attest.DecodeStrict(payload, &ev); err != nil {
		return nil, formatError(ReasonJSONSchema, "event: %v", err)
	}
	if canon, err := json.Marshal(&ev); err != nil || !bytes.Equal(canon, payload) {
		return nil, formatError(ReasonJSONSchema, "event is not in canonical form")
	}
	if err := ev.Validate(); err != nil {
		return nil, verifyError(ReasonEventFormat, err, "event")
	}
	return &ev, nil
}

// within names the file an error of a reader is about.
func within(name string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.msg = name + ": " + e.msg
	}
	return err
}
