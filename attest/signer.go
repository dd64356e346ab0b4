package attest

import (
	"crypto/ed25519"
	"fmt"
)

// Signer is the service's attestation key and the one signer of what the
// service attests: its erasure attestations (Sign) and the lifecycle
// events of its transparency log (SignEvent). The private key is held
// here only: the composition root reads the key file, builds the Signer
// once and hands it to those that sign (the journal, the erasure), which
// ask it and never see the key. It is safe for concurrent use.
type Signer struct {
	key ed25519.PrivateKey
}

// NewSigner returns the Signer of key, which it copies. A key that is not
// an Ed25519 private key gives ErrKey.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("attest: signer: private key of %d bytes: %w", len(key), ErrKey)
	}
	return &Signer{key: append(ed25519.PrivateKey(nil), key...)}, nil
}

// Public returns the public key that verifies what s signs.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign is the package's Sign with s's key: the DSSE envelope of the
// attestation st, validated first.
func (s *Signer) Sign(st Statement) (Envelope, error) { return Sign(st, s.key) }

// SignEvent is the package's SignEvent with s's key: the log entry of ev,
// validated first.
func (s *Signer) SignEvent(ev Event) ([]byte, error) { return SignEvent(ev, s.key) }
