package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Log events: every lifecycle event of shredd is an entry of its
// transparency log (docs/transparency.md), and each entry is one of these
// events signed by the service's attestation key, as a DSSE envelope of
// EventPayloadType whose JSON is the exact entry. An event is small (at most
// MaxEventSize bytes as an entry, the log's bound): what can be large (an
// attestation, a holder's list of artifacts) is logged as its SHA-256.
const (
	// EventPayloadType is the DSSE payload type of a log event.
	EventPayloadType = "application/vnd.shredd.log-event+json"
	// EventType is the _type of every log event.
	EventType = "https://shredd.dev/log-event/v1"
	// MaxEventSize bounds a signed event, in bytes: a tlog-tiles entry
	// bundle gives each entry a 16-bit length.
	MaxEventSize = 65535
)

// The kinds of log event (Event.Event).
const (
	// EventKeyCreated: a subject key (a generation of it) was created.
	EventKeyCreated = "key_created"
	// EventForgetCommitted: a forget committed; the subject's key is
	// destroyed and the barrier is in place.
	EventForgetCommitted = "forget_committed"
	// EventEpochCompleted: a root epoch rotated the root key and destroyed
	// the older versions.
	EventEpochCompleted = "epoch_completed"
	// EventHolderAck: a holder's signed purge ack was accepted.
	EventHolderAck = "holder_ack"
	// EventErasureAttested: a forget was proven erased and its attestation
	// signed.
	EventErasureAttested = "erasure_attested"
	// EventSubjectReinstated: an operator reinstated a forgotten subject:
	// a new key generation started for it. The destroyed generation stays
	// destroyed, its forget and attestation unchanged.
	EventSubjectReinstated = "subject_reinstated"
)

// Event is one lifecycle event of the transparency log. Exactly the part
// named by Event is set.
type Event struct {
	Type     string         `json:"_type"` // EventType
	Event    string         `json:"event"` // one of the Event* kinds
	Time     time.Time      `json:"time"`  // UTC
	Key      *KeyEvent      `json:"key,omitempty"`
	Forget   *ForgetEvent   `json:"forget,omitempty"`
	Epoch    *EpochEvent    `json:"epoch,omitempty"`
	Ack      *AckEvent      `json:"ack,omitempty"`
	Attested *AttestedEvent `json:"attested,omitempty"`
	// Reinstated is the part of a subject_reinstated event.
	Reinstated *ReinstatedEvent `json:"reinstated,omitempty"`
}

// KeyEvent is a key_created event: the subject is a salted commitment
// (Commit), never the id. Its salt is derived from the key itself, so it
// exists only while the key does; the forget that destroys the key hands
// it to its caller, who can then open the commitment.
type KeyEvent struct {
	Subject    string `json:"subject"`
	Generation uint32 `json:"generation"`
}

// ForgetEvent is a forget_committed event.
type ForgetEvent struct {
	Forget     string `json:"forget"`
	Subject    string `json:"subject"`    // the commitment of the forget's attestation
	Generation uint32 `json:"generation"` // the key generation destroyed (0: the subject never had a key)
	Barrier    int64  `json:"barrier"`    // artifacts up to this sequence were registered before the forget
	// KeyCreated is the log index of the key_created event of the
	// destroyed generation, or -1 when the log holds none (no key, or a key
	// made before the log existed).
	KeyCreated int64 `json:"key_created_index"`
}

// EpochEvent is an epoch_completed event.
type EpochEvent struct {
	Epoch       int64  `json:"epoch"`
	RootStore   string `json:"root_store"`
	FromVersion int    `json:"from_version"`
	ToVersion   int    `json:"to_version"`
	Retired     []int  `json:"retired_versions"`
}

// AckEvent is a holder_ack event: the holder's signature over
// AckMessage(forget, holder, artifacts), logged with the message's SHA-256
// (the artifact list can be long; the attestation carries it).
type AckEvent struct {
	Forget        string            `json:"forget"`
	Holder        string            `json:"holder"`
	PublicKey     ed25519.PublicKey `json:"public_key"`
	Artifacts     int               `json:"artifacts"`
	MessageSHA256 string            `json:"message_sha256"`
	Signature     []byte            `json:"signature"`
}

// AttestedEvent is an erasure_attested event: the SHA-256 of the exact
// attestation file (the DSSE envelope's JSON) of the forget.
type AttestedEvent struct {
	Forget            string `json:"forget"`
	Subject           string `json:"subject"`
	AttestationSHA256 string `json:"attestation_sha256"`
}

// ReinstatedEvent is a subject_reinstated event: a forgotten subject got a
// new key generation. Subject is the salted commitment (Commit) to the
// subject id under the new generation's key (the same commitment as that
// generation's key_created event), never the id; nothing in it links to
// the commitment of the forget it follows but the forget's id.
type ReinstatedEvent struct {
	Subject    string `json:"subject"`
	Generation uint32 `json:"generation"`          // the new generation, >= 1
	Previous   uint32 `json:"previous_generation"` // the destroyed generation (0: the subject never had a key), < Generation
	Forget     string `json:"forget"`              // the forget that destroyed the previous generation
}

// NewAckEvent returns the holder_ack event of an accepted ack.
func NewAckEvent(forget string, h HolderAck) AckEvent {
	d := sha256.Sum256(AckMessage(forget, h.Holder, h.Artifacts))
	return AckEvent{Forget: forget, Holder: h.Holder, PublicKey: h.PublicKey, Artifacts: len(h.Artifacts),
		MessageSHA256: hex.EncodeToString(d[:]), Signature: h.Signature}
}

// Digest returns the lower-case hex SHA-256 of data, the form events use.
func Digest(data []byte) string {
	d := sha256.Sum256(data)
	return hex.EncodeToString(d[:])
}

// SignEvent validates ev and returns the log entry: the JSON of its DSSE
// envelope signed by signer. The error wraps ErrFormat or ErrKey.
func SignEvent(ev Event, signer ed25519.PrivateKey) ([]byte, error) {
	if len(signer) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("attest: sign event: private key of %d bytes: %w", len(signer), ErrKey)
	}
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(&ev)
	if err != nil {
		return nil, fmt.Errorf("attest: sign event: %v: %w", err, ErrFormat)
	}
	env := signEnvelope(EventPayloadType, payload, signer)
	entry, err := json.Marshal(&env)
	if err != nil {
		return nil, fmt.Errorf("attest: sign event: %v: %w", err, ErrFormat)
	}
	if len(entry) > MaxEventSize {
		return nil, formatErr("event of %d bytes, at most %d", len(entry), MaxEventSize)
	}
	return entry, nil
}

// OpenEvent verifies a log entry under pub and returns its event: the
// envelope is canonical with one signature by pub over EventPayloadType,
// and the payload is a canonical, valid Event. The error wraps ErrFormat,
// ErrSignature, ErrKey or ErrAck.
func OpenEvent(entry []byte, pub ed25519.PublicKey) (*Event, error) {
	if len(entry) > MaxEventSize {
		return nil, formatErr("event of %d bytes, at most %d", len(entry), MaxEventSize)
	}
	payload, err := verifyEnvelope(entry, pub, EventPayloadType)
	if err != nil {
		return nil, err
	}
	var ev Event
	if err := DecodeStrict(payload, &ev); err != nil {
		return nil, formatErr("event: %v", err)
	}
	canon, err := json.Marshal(&ev)
	if err != nil || !bytes.Equal(canon, payload) {
		return nil, formatErr("event is not in canonical form")
	}
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	return &ev, nil
}

// Validate checks that ev is well-formed: its type, a UTC time, exactly the
// part its kind names, with valid ids, commitments and digests (and, for a
// holder ack, a well-formed key and signature size).
func (ev *Event) Validate() error {
	if ev.Type != EventType {
		return formatErr("event _type is %s, want %q", truncate(ev.Type), EventType)
	}
	if ev.Time.IsZero() || ev.Time.Location() != time.UTC {
		return formatErr("event time must be set, in UTC")
	}
	if parts := ev.parts(); parts != 1 {
		return formatErr("event has %d parts, want exactly the one its kind names", parts)
	}
	return ev.validatePart()
}

// parts counts the parts ev carries.
func (ev *Event) parts() int {
	parts := 0
	for _, set := range []bool{ev.Key != nil, ev.Forget != nil, ev.Epoch != nil, ev.Ack != nil, ev.Attested != nil, ev.Reinstated != nil} {
		if set {
			parts++
		}
	}
	return parts
}

// validatePart checks that ev carries the part its kind names, well-formed.
func (ev *Event) validatePart() error {
	switch {
	case ev.Event == EventKeyCreated && ev.Key != nil:
		return ev.Key.validate()
	case ev.Event == EventForgetCommitted && ev.Forget != nil:
		return ev.Forget.validate()
	case ev.Event == EventEpochCompleted && ev.Epoch != nil:
		return ev.Epoch.validate()
	case ev.Event == EventHolderAck && ev.Ack != nil:
		return ev.Ack.validate()
	case ev.Event == EventErasureAttested && ev.Attested != nil:
		return ev.Attested.validate()
	case ev.Event == EventSubjectReinstated && ev.Reinstated != nil:
		return ev.Reinstated.validate()
	}
	return formatErr("event %s does not carry its part", truncate(ev.Event))
}

// validate checks the part of a key_created event.
func (k *KeyEvent) validate() error {
	if !validCommitment(k.Subject) || k.Generation == 0 {
		return formatErr("key_created: subject must be a commitment and generation >= 1")
	}
	return nil
}

// validate checks the part of a forget_committed event.
func (f *ForgetEvent) validate() error {
	if !validID(f.Forget) || !validCommitment(f.Subject) || f.Barrier < 0 || f.KeyCreated < -1 {
		return formatErr("forget_committed: malformed forget id, commitment, barrier or key_created_index")
	}
	return nil
}

// validate checks the part of a epoch_completed event.
func (e *EpochEvent) validate() error {
	if e.Epoch <= 0 || e.ToVersion < e.FromVersion || e.Retired == nil || !validID(e.RootStore) {
		return formatErr("epoch_completed: malformed epoch, versions or root store")
	}
	return nil
}

// validate checks the part of a holder_ack event.
func (a *AckEvent) validate() error {
	if !validID(a.Forget) || !validID(a.Holder) || len(a.PublicKey) != ed25519.PublicKeySize ||
		len(a.Signature) != ed25519.SignatureSize || a.Artifacts <= 0 || !validCommitment(a.MessageSHA256) {
		return formatErr("holder_ack: malformed forget, holder, key, signature, count or digest")
	}
	return nil
}

// validate checks the part of a erasure_attested event.
func (a *AttestedEvent) validate() error {
	if !validID(a.Forget) || !validCommitment(a.Subject) || !validCommitment(a.AttestationSHA256) {
		return formatErr("erasure_attested: malformed forget, commitment or digest")
	}
	return nil
}

// validate checks the part of a subject_reinstated event.
func (r *ReinstatedEvent) validate() error {
	if !validCommitment(r.Subject) || r.Generation == 0 || r.Previous >= r.Generation || !validID(r.Forget) {
		return formatErr("subject_reinstated: subject must be a commitment, generation >= 1 above previous_generation, and forget an id")
	}
	return nil
}
