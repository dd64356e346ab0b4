package bundle

import (
	"errors"
	"fmt"
)

// Reason codes: the stable name of the first rule of the evidence spec
// (docs/transparency.md, "Reading an export strictly") that an input
// breaks. Every reader of evidence (shredd verify, the page, the Go and
// Python clients) gives the same code for the same input; the shared
// corpus under testdata/evidence holds the expected one for each case.
// Codes are append-only: a published code never changes meaning.
const (
	ReasonOK = "ok"

	// The keys the verifier gives (and the copies inside the export).
	ReasonTextBOM     = "text.bom"     // a text file starts with a UTF-8 BOM
	ReasonTextUTF8    = "text.utf8"    // a text file is not UTF-8
	ReasonKeyLeading  = "key.leading"  // data before the PEM block
	ReasonKeyTrailing = "key.trailing" // data after the PEM block
	ReasonKeyFormat   = "key.format"   // not the one PEM Ed25519 PUBLIC KEY form
	ReasonLogKey      = "logkey.format"
	// A witness key the verifier gives (--witness): not one cosignature/v1
	// verifier key line; or two keys with one public key, or one name and
	// key ID.
	ReasonWitnessFormat    = "witness.format"
	ReasonWitnessDuplicate = "witness.duplicate"

	// gzip (RFC 1952), one member.
	ReasonGzipHeader    = "gzip.header"
	ReasonGzipDeflate   = "gzip.deflate"
	ReasonGzipTruncated = "gzip.truncated"
	ReasonGzipCRC       = "gzip.crc"
	ReasonGzipSize      = "gzip.size"
	ReasonGzipMulti     = "gzip.multi-member"
	ReasonGzipTrailing  = "gzip.trailing"
	ReasonGzipTooLarge  = "gzip.too-large"

	// tar (POSIX ustar only).
	ReasonTarTruncated = "tar.truncated"
	ReasonTarChecksum  = "tar.checksum"
	ReasonTarMagic     = "tar.magic"
	ReasonTarHeader    = "tar.header"
	ReasonTarBase256   = "tar.base256"
	ReasonTarPAX       = "tar.pax"
	ReasonTarGNU       = "tar.gnu"
	ReasonTarType      = "tar.type"
	ReasonTarPath      = "tar.path"
	ReasonTarDuplicate = "tar.duplicate"
	ReasonTarEnd       = "tar.end"
	ReasonTarTrailing  = "tar.trailing"

	// The export's files.
	ReasonLayout      = "bundle.layout"
	ReasonUnknownFile = "bundle.unknown-file"
	ReasonMissingFile = "bundle.missing-file"
	ReasonFileSize    = "bundle.size"

	// JSON (RFC 8259, I-JSON subset).
	ReasonJSONBOM       = "json.bom"
	ReasonJSONUTF8      = "json.utf8"
	ReasonJSONSyntax    = "json.syntax"
	ReasonJSONDuplicate = "json.duplicate-key"
	ReasonJSONNumber    = "json.number"
	ReasonJSONTrailing  = "json.trailing"
	ReasonJSONSchema    = "json.schema"

	// DSSE envelopes (attestation.json and every log entry).
	ReasonEnvelopeFormat    = "envelope.format"
	ReasonEnvelopeSignature = "envelope.signature"

	// The statement (attest.Validate's errors) and the subject.
	ReasonStatementFormat      = "statement.format"
	ReasonStatementClaim       = "statement.claim"
	ReasonStatementConditions  = "statement.conditions"
	ReasonStatementTimeline    = "statement.timeline"
	ReasonStatementKeyEvidence = "statement.key-evidence"
	ReasonStatementAcks        = "statement.acks"
	ReasonStatementResiduals   = "statement.residuals"
	ReasonStatementProbes      = "statement.probes" // a holder's probe answer (attestation.md §6a)
	ReasonStatementForget      = "statement.forget"
	ReasonSubject              = "subject.mismatch"

	// The checkpoint, the entries and their proofs.
	ReasonCheckpointFormat    = "checkpoint.format"
	ReasonCheckpointSignature = "checkpoint.signature"
	ReasonCheckpointOrigin    = "checkpoint.origin"
	// ReasonCheckpointWitnesses: fewer valid cosignatures of the witnesses
	// the verifier trusts than it requires (docs/transparency.md §13).
	ReasonCheckpointWitnesses = "checkpoint.witnesses"
	ReasonProofFormat         = "proof.format"
	ReasonProofIndex          = "proof.index"
	ReasonProofCheckpoint     = "proof.checkpoint"
	ReasonProofInclusion      = "proof.inclusion"
	ReasonEventFormat         = "event.format"
	ReasonEventKind           = "event.kind"
	ReasonEntries             = "entries.mismatch"

	// A checkpoint saved earlier, and the consistency proof from it.
	ReasonSavedFormat       = "saved.format"
	ReasonSavedSignature    = "saved.signature"
	ReasonSavedOrigin       = "saved.origin"
	ReasonConsistencyNewer  = "consistency.newer"
	ReasonConsistencyNone   = "consistency.missing"
	ReasonConsistencyFormat = "consistency.format"
	ReasonConsistencyRange  = "consistency.range"
	ReasonConsistencyFork   = "consistency.fork"

	// ReasonUsage is not a refusal of the evidence: the verifier's own
	// input (a salt that is not 64 hex digits, a subject without a salt,
	// a number of witnesses out of range) is malformed. The corpus marks
	// such cases with the verdict "usage"; shredd verify exits 2.
	ReasonUsage = "usage"
)

// ErrUsage reports a malformed input of the verifier's own (ReasonUsage):
// nothing was checked.
var ErrUsage = errors.New("bundle: usage")

// Error is a refusal by Read or Verify: its reason code and what failed.
// It wraps ErrFormat (the input breaks the format) or ErrVerify (a check
// failed), and the error of the check when there is one.
type Error struct {
	Reason string
	kind   error // ErrFormat or ErrVerify
	msg    string
	err    error
}

func (e *Error) Error() string {
	if e.err != nil {
		return fmt.Sprintf("bundle: %s [%s]: %v", e.msg, e.Reason, e.err)
	}
	return fmt.Sprintf("bundle: %s [%s]", e.msg, e.Reason)
}

// Unwrap returns the kind (ErrFormat or ErrVerify) and the check's error.
func (e *Error) Unwrap() []error {
	if e.err != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.kind}
}

// Reason returns the reason code of an error of Read or Verify, ReasonOK
// for nil, ReasonUsage for ErrUsage, and "" for an error that carries
// none.
func Reason(err error) string {
	if err == nil {
		return ReasonOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if errors.Is(err, ErrUsage) {
		return ReasonUsage
	}
	return ""
}

func formatError(reason, format string, a ...any) error {
	return &Error{Reason: reason, kind: ErrFormat, msg: fmt.Sprintf(format, a...)}
}

func verifyError(reason string, err error, format string, a ...any) error {
	return &Error{Reason: reason, kind: ErrVerify, msg: fmt.Sprintf(format, a...), err: err}
}

func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, a...)...)
}
