package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// PEM block types of the key files: the standard ones, so that OpenSSL
// and every other tool read them (`openssl pkey -pubin -in attestation.pub`).
const (
	pemPublic  = "PUBLIC KEY"  // SubjectPublicKeyInfo (PKIX, RFC 8410)
	pemPrivate = "PRIVATE KEY" // PKCS #8, unencrypted (RFC 8410)
)

// MarshalPublicKey returns pub as a PEM "PUBLIC KEY" block (PKIX).
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("attest: public key of %d bytes: %w", len(pub), ErrKey)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("attest: public key: %v: %w", err, ErrKey)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublic, Bytes: der}), nil
}

// ParsePublicKey parses a PEM "PUBLIC KEY" block holding an Ed25519 key.
// Anything else in the file but whitespace is refused. The error wraps
// ErrKey.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	der, err := onePEM(data, pemPublic)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("attest: public key: %v: %w", err, ErrKey)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("attest: public key is %T, not Ed25519: %w", k, ErrKey)
	}
	return pub, nil
}

// MarshalPrivateKey returns key as a PEM "PRIVATE KEY" block (PKCS #8,
// unencrypted: protect the file with its permissions).
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("attest: private key of %d bytes: %w", len(key), ErrKey)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("attest: private key: %v: %w", err, ErrKey)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der}), nil
}

// ParsePrivateKey parses a PEM "PRIVATE KEY" block (PKCS #8) holding an
// Ed25519 key. The error wraps ErrKey.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	der, err := onePEM(data, pemPrivate)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("attest: private key: %v: %w", err, ErrKey)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("attest: private key is %T, not Ed25519: %w", k, ErrKey)
	}
	return key, nil
}

// onePEM returns the bytes of the only PEM block in data, of type typ and
// without headers.
func onePEM(data []byte, typ string) ([]byte, error) {
	b, rest := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("attest: no PEM %q block: %w", typ, ErrKey)
	}
	if b.Type != typ || len(b.Headers) != 0 {
		return nil, fmt.Errorf("attest: PEM block %q, want %q without headers: %w", b.Type, typ, ErrKey)
	}
	if bytes.ContainsFunc(rest, func(r rune) bool { return r != '\r' && r != '\n' }) { // line ends only
		return nil, fmt.Errorf("attest: data after the PEM %q block: %w", typ, ErrKey)
	}
	return b.Bytes, nil
}
