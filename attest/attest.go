package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Labels and sizes.
const (
	// LabelCommitment separates subject commitments from every other
	// SHA-256 in shredd.
	LabelCommitment = "shredd/v1/subject-commitment"
	// LabelHolderAck is the first line of every holder ack message.
	LabelHolderAck = "shredd/v1/holder-ack"
	// LabelHolderProbe is the first line of every probe answer message.
	LabelHolderProbe = "shredd/v1/holder-probe"
	// SaltSize is the size of a commitment salt: 256 bits, so that the
	// commitment hides the subject id even when the id is guessable.
	SaltSize = 32
	// PayloadType is the DSSE payload type of an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
	// MaxEnvelopeSize bounds the envelope JSON Open reads, in bytes.
	MaxEnvelopeSize = 64 << 20
)

// NewSalt returns a fresh random salt of SaltSize bytes for Commit.
//
// The salt is handed to the caller of forget and never published: subject
// ids are often emails or account numbers, which anyone can enumerate, so
// an unsalted hash would let any reader of the transparency log test
// guesses. With a 256-bit secret salt only whoever holds both the id and the
// salt can link an attestation to a person.
func NewSalt() []byte {
	salt := make([]byte, SaltSize)
	rand.Read(salt) // never fails (Go 1.24+)
	return salt
}

// ParseSalt decodes the hex form of a salt (64 hex digits).
func ParseSalt(s string) ([]byte, error) {
	salt, err := hex.DecodeString(s)
	if err != nil || len(salt) != SaltSize {
		return nil, fmt.Errorf("attest: salt must be %d hex digits: %w", 2*SaltSize, ErrFormat)
	}
	return salt, nil
}

// Commit returns the commitment to subject under salt, as 64 lower-case
// hex digits:
//
//	SHA-256(LabelCommitment ‖ 0x00 ‖ salt ‖ subject)
//
// The salt has a fixed size, so the concatenation is unambiguous. Commit
// panics if salt is not SaltSize bytes, like a wrong key size elsewhere in
// Go's crypto.
func Commit(subject string, salt []byte) string {
	if len(salt) != SaltSize {
		panic("attest: Commit: salt must be " + strconv.Itoa(SaltSize) + " bytes")
	}
	d := commit(subject, salt)
	return hex.EncodeToString(d[:])
}

func commit(subject string, salt []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(LabelCommitment))
	h.Write([]byte{0})
	h.Write(salt)
	h.Write([]byte(subject))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// CheckCommitment reports whether subject and salt open commitment (its
// hex form, as in the statement). The comparison is in constant time; a
// salt of the wrong size or a malformed commitment never matches.
func CheckCommitment(subject string, salt []byte, commitment string) bool {
	want, err := hex.DecodeString(commitment)
	if err != nil || len(want) != sha256.Size || len(salt) != SaltSize {
		return false
	}
	got := commit(subject, salt)
	return subtle.ConstantTimeCompare(got[:], want) == 1
}

// Envelope is a DSSE envelope. Its JSON form is the attestation file.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     []byte      `json:"payload"` // standard base64 in JSON
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature.
type Signature struct {
	KeyID string `json:"keyid"` // KeyID of the signing key
	Sig   []byte `json:"sig"`   // Ed25519 over PAE(payloadType, payload); standard base64 in JSON
}

// PAE returns the DSSE pre-authentication encoding, the bytes a signature
// covers:
//
//	"DSSEv1" SP LEN(payloadType) SP payloadType SP LEN(payload) SP payload
//
// with LEN the byte length in ASCII decimal. Signing the type along with
// the payload stops a signature made for one kind of payload from being
// accepted as another.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// KeyID returns the key id of pub: the hex SHA-256 of the raw 32-byte
// public key. It is a hint in the envelope (DSSE does not authenticate it);
// Open checks it against the key it was given, to name a wrong key as such.
func KeyID(pub ed25519.PublicKey) string {
	d := sha256.Sum256(pub)
	return hex.EncodeToString(d[:])
}

// Sign validates st (Statement.Validate), so that the service never signs
// an attestation a verifier would refuse, and returns the DSSE envelope of
// its canonical encoding signed by signer. The error wraps the
// validation's error, or ErrKey for a malformed key.
func Sign(st Statement, signer ed25519.PrivateKey) (Envelope, error) {
	if len(signer) != ed25519.PrivateKeySize {
		return Envelope{}, fmt.Errorf("attest: sign: private key of %d bytes: %w", len(signer), ErrKey)
	}
	if err := st.Validate(); err != nil {
		return Envelope{}, err
	}
	payload, err := st.Marshal()
	if err != nil {
		return Envelope{}, err
	}
	return signEnvelope(PayloadType, payload, signer), nil
}

// signEnvelope signs payload as a DSSE envelope of payloadType; signer has
// the right size.
func signEnvelope(payloadType string, payload []byte, signer ed25519.PrivateKey) Envelope {
	pub := signer.Public().(ed25519.PublicKey)
	return Envelope{
		PayloadType: payloadType,
		Payload:     payload,
		Signatures:  []Signature{{KeyID: KeyID(pub), Sig: ed25519.Sign(signer, PAE(payloadType, payload))}},
	}
}

// Open verifies an attestation file (the envelope's JSON) under pub and
// returns its statement: Verify, then ParseStatement on the authenticated
// payload (strict and canonical, then Validate: the claim's wording, the
// five conditions all ok, the timeline order, the key evidence, the holder
// acks and the residuals). The error wraps ErrFormat, ErrSignature, ErrKey,
// or one of Validate's errors; the statement is nil unless the error is
// nil. The subject commitment is left to the caller, who holds the subject
// id and the salt (Statement.CheckSubject).
func Open(envelopeJSON []byte, pub ed25519.PublicKey) (*Statement, error) {
	payload, err := Verify(envelopeJSON, pub)
	if err != nil {
		return nil, err
	}
	return ParseStatement(payload)
}

// Verify checks the DSSE envelope and its signature, and returns the
// authenticated payload, unparsed. In order: the envelope is well-formed
// and in canonical form (insignificant whitespace aside), the payload type
// is PayloadType, there is exactly one signature, its key id is pub's, and
// it verifies over PAE. The error wraps ErrFormat, ErrSignature or ErrKey.
// Most callers want Open.
func Verify(envelopeJSON []byte, pub ed25519.PublicKey) ([]byte, error) {
	return verifyEnvelope(envelopeJSON, pub, PayloadType)
}

// verifyEnvelope is Verify for a DSSE envelope of payloadType.
func verifyEnvelope(envelopeJSON []byte, pub ed25519.PublicKey, payloadType string) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("attest: verify: public key of %d bytes: %w", len(pub), ErrKey)
	}
	if len(envelopeJSON) > MaxEnvelopeSize {
		return nil, formatErr("envelope over %d bytes", MaxEnvelopeSize)
	}
	var env Envelope
	if err := DecodeStrict(envelopeJSON, &env); err != nil {
		return nil, formatErr("envelope: %v", err)
	}
	// One envelope, one spelling: the JSON must be what Sign and
	// json.Marshal produce, up to whitespace between tokens. This refuses
	// duplicate or case-folded keys, base64 with line breaks or non-zero
	// padding bits, and escaped spellings, which encoding/json would
	// otherwise accept silently.
	var compact bytes.Buffer
	if err := json.Compact(&compact, envelopeJSON); err != nil {
		return nil, formatErr("envelope: %v", err)
	}
	canon, err := json.Marshal(&env)
	if err != nil || !bytes.Equal(canon, compact.Bytes()) {
		return nil, formatErr("envelope is not in canonical form")
	}
	if env.PayloadType != payloadType {
		return nil, formatErr("payloadType is %s, want %q", truncate(env.PayloadType), payloadType)
	}
	if len(env.Signatures) != 1 {
		return nil, formatErr("%d signatures, want exactly 1", len(env.Signatures))
	}
	sig := env.Signatures[0]
	if want := KeyID(pub); sig.KeyID != want {
		return nil, fmt.Errorf("attest: signed by key id %s, not by the given key (key id %s): %w", truncate(sig.KeyID), want, ErrSignature)
	}
	if !ed25519.Verify(pub, PAE(env.PayloadType, env.Payload), sig.Sig) {
		return nil, fmt.Errorf("attest: the signature does not verify: %w", ErrSignature)
	}
	return env.Payload, nil
}

// truncate shortens an untrusted string for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// AckMessage returns the bytes a holder signs to ack the purge of
// artifacts for forget: lines ending in "\n", the label, then
// "forget <id>", "holder <id>" and one "artifact <id>" per artifact in
// byte order. Identifiers contain no spaces or control characters, so the
// message has one reading.
func AckMessage(forget, holder string, artifacts []string) []byte {
	ids := slices.Clone(artifacts)
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString(LabelHolderAck + "\n")
	b.WriteString("forget " + forget + "\n")
	b.WriteString("holder " + holder + "\n")
	for _, id := range ids {
		b.WriteString("artifact " + id + "\n")
	}
	return []byte(b.String())
}

// ProbeMessage returns the exact bytes a holder signs to answer a probe
// (docs/attestation.md §6a): the label, the probe, the forget, the holder,
// the nonce, then one line per artifact asked, per marker asked and per
// thing found, each group sorted:
//
//	shredd/v1/holder-probe
//	probe <id>
//	forget <id>
//	holder <id>
//	nonce <hex>
//	asked <artifact id>
//	marker <marker>
//	found <artifact id or marker>
//
// The times are shredd's record, not the holder's: the nonce, fresh for
// each probe, is what shows the answer came after the question.
func ProbeMessage(probe, forget, holder, nonce string, artifacts, markers, found []string) []byte {
	var b strings.Builder
	b.WriteString(LabelHolderProbe + "\n")
	b.WriteString("probe " + probe + "\n")
	b.WriteString("forget " + forget + "\n")
	b.WriteString("holder " + holder + "\n")
	b.WriteString("nonce " + nonce + "\n")
	for _, g := range []struct {
		word string
		ids  []string
	}{{"asked", artifacts}, {"marker", markers}, {"found", found}} {
		ids := slices.Clone(g.ids)
		slices.Sort(ids)
		for _, id := range ids {
			b.WriteString(g.word + " " + id + "\n")
		}
	}
	return []byte(b.String())
}

// SignProbe signs a holder's answer to a probe with its key: the
// signature over ProbeMessage.
func SignProbe(probe, forget, holder, nonce string, artifacts, markers, found []string, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("attest: probe: private key of %d bytes: %w", len(key), ErrKey)
	}
	return ed25519.Sign(key, ProbeMessage(probe, forget, holder, nonce, artifacts, markers, found)), nil
}

// SignAck returns the ack of holder, signing with its key, that it purged
// artifacts for forget. Holders written in Go can use it; any other
// implementation signs AckMessage with Ed25519. The error wraps ErrAck or
// ErrKey.
func SignAck(forget, holder string, artifacts []string, key ed25519.PrivateKey) (HolderAck, error) {
	if len(key) != ed25519.PrivateKeySize {
		return HolderAck{}, fmt.Errorf("attest: ack: private key of %d bytes: %w", len(key), ErrKey)
	}
	h := HolderAck{Holder: holder, PublicKey: key.Public().(ed25519.PublicKey), Artifacts: slices.Clone(artifacts)}
	if err := h.check(forget); err != nil {
		return HolderAck{}, err
	}
	h.Signature = ed25519.Sign(key, AckMessage(forget, holder, artifacts))
	return h, nil
}

// check validates the ack's fields.
func (h *HolderAck) check(forget string) error {
	if !validID(forget) || !validID(h.Holder) {
		return fmt.Errorf("attest: ack: forget and holder ids must be non-empty printable ASCII without spaces: %w", ErrAck)
	}
	if len(h.Artifacts) == 0 {
		return fmt.Errorf("attest: ack of holder %s names no artifact: %w", h.Holder, ErrAck)
	}
	seen := make(map[string]bool, len(h.Artifacts))
	for _, id := range h.Artifacts {
		if !validID(id) || seen[id] {
			return fmt.Errorf("attest: ack of holder %s: artifact id %s malformed or repeated: %w", h.Holder, truncate(id), ErrAck)
		}
		seen[id] = true
	}
	if len(h.PublicKey) != ed25519.PublicKeySize {
		return fmt.Errorf("attest: ack of holder %s: public key of %d bytes: %w", h.Holder, len(h.PublicKey), ErrAck)
	}
	return nil
}

// verify checks the ack's fields and its signature.
func (h *HolderAck) verify(forget string) error {
	if err := h.check(forget); err != nil {
		return err
	}
	if len(h.Signature) != ed25519.SignatureSize || !ed25519.Verify(h.PublicKey, AckMessage(forget, h.Holder, h.Artifacts), h.Signature) {
		return fmt.Errorf("attest: ack of holder %s does not verify under its public key: %w", h.Holder, ErrAck)
	}
	return nil
}
