package bundle

import (
	"crypto/ed25519"

	"github.com/shredd/shredd/attest"
)

// CheckAttestation is the whole of `shredd verify FILE.json` on a bare
// attestation (docs/attestation.md §9, docs/transparency.md §10b): the
// attestation key file, read strictly (CheckPublicKeyFile); the file, at
// most attest.MaxEnvelopeSize (bundle.size); the envelope and the
// statement by the JSON rules and in canonical form, the signature and
// every rule of the statement, as in an export (§10a.5, §10a.6), but
// statement.forget, which needs an export; and, when a subject and a salt
// are given (both or neither), that they open the commitment
// (subject.mismatch). It returns the statement; the error is an *Error
// whose Reason is the spec's reason code, or ErrUsage for the verifier's
// own malformed inputs (checkInputs).
func CheckAttestation(data, keyFile []byte, subject string, salt []byte) (*attest.Statement, error) {
	if err := checkInputs(keyFile, []byte{}, subject, salt); err != nil {
		return nil, err
	}
	k, err := CheckPublicKeyFile(keyFile)
	if err != nil {
		return nil, err
	}
	if len(data) > attest.MaxEnvelopeSize {
		return nil, formatError(ReasonFileSize, "an attestation over %d bytes", attest.MaxEnvelopeSize)
	}
	payload, err := openEnvelope(data, ed25519.PublicKey(k), attest.PayloadType)
	if err != nil {
		return nil, err
	}
	st, err := parseStatement(payload)
	if err != nil {
		return nil, err
	}
	if salt != nil {
		if err := st.CheckSubject(subject, salt); err != nil {
			return st, verifyError(ReasonSubject, err, "subject")
		}
	}
	return st, nil
}

// checkInputs checks the verifier's own inputs before anything is read
// (docs/transparency.md §10a, "usage"): both key files given, and a
// subject and a salt both or neither, the subject not empty and the salt
// attest.SaltSize bytes. A usage error checks nothing.
func checkInputs(keyFile, logKeyFile []byte, subject string, salt []byte) error {
	switch {
	case keyFile == nil:
		return usageError("no attestation key: give the operator's attestation.pub")
	case logKeyFile == nil:
		return usageError("no log key: give the operator's log.vkey")
	case (subject != "") != (salt != nil):
		return usageError("give the subject id and the salt, both or neither (an empty subject id is none)")
	case salt != nil && len(salt) != attest.SaltSize:
		return usageError("a salt of %d bytes, want %d", len(salt), attest.SaltSize)
	}
	return nil
}
