// Package testkeys holds fixed, test-only subject keys, subject ids, artifact
// ids, attestation and transparency log keys and a deterministic randomness
// source, for reproducible tests and the envelope test vectors.
//
// It is imported by tests and the envelope vector generator only, never by
// the shredd binary: every key here is public, so anything sealed under it
// is not secret.
//
// Every value is SHA-256 of a domain-separation label and an index, so it is
// the same on every machine and in every release.
package testkeys

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"io"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/envelope"
)

// Labels of the derivations, one per kind of value.
const (
	labelSID      = "shredd/testkeys/sid"
	labelKey      = "shredd/testkeys/subject-key"
	labelArtifact = "shredd/testkeys/artifact"
	labelRand     = "shredd/testkeys/rand"
	labelAttest   = "shredd/testkeys/attestation-key"
	// seedLog is the Rand seed of LogKey. It predates this package's
	// labels: the verifier key it gives is published in api/openapi.json
	// and docs/transparency.md, so it must never change.
	seedLog = "api test log key"
)

// LogOrigin is the origin (the note name) of LogKey's log.
const LogOrigin = "shredd/0123456789abcdef"

// digest returns SHA-256(label ‖ 0x00 ‖ uint64be(i)).
func digest(label string, i int) [sha256.Size]byte {
	b := make([]byte, 0, len(label)+1+8)
	b = append(b, label...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(i))
	return sha256.Sum256(b)
}

// SID returns the subject id of test subject i.
func SID(i int) envelope.SID {
	return envelope.SID(digest(labelSID, i))
}

// SubjectKey returns the subject key (DEK) of test subject i, a new
// envelope.KeySize-byte slice on every call.
func SubjectKey(i int) []byte {
	k := digest(labelKey, i)
	return k[:]
}

// Ref returns the lineage reference of test subject i at key generation 1.
func Ref(i int) envelope.Ref {
	return envelope.Ref{SID: SID(i), Gen: 1}
}

// Key returns the subject key of Ref(i).
func Key(i int) envelope.SubjectKey {
	return envelope.SubjectKey{Ref: Ref(i), Key: SubjectKey(i)}
}

// Lineage returns the refs of test subjects 0 to n-1, in index order (not
// canonical order).
func Lineage(n int) []envelope.Ref {
	l := make([]envelope.Ref, n)
	for i := range l {
		l[i] = Ref(i)
	}
	return l
}

// Keys returns the keys of test subjects 0 to n-1, in index order.
func Keys(n int) []envelope.SubjectKey {
	k := make([]envelope.SubjectKey, n)
	for i := range k {
		k[i] = Key(i)
	}
	return k
}

// Artifact returns the id of test artifact i.
func Artifact(i int) envelope.ArtifactID {
	d := digest(labelArtifact, i)
	return envelope.ArtifactID(d[:envelope.ArtifactIDSize])
}

// AttestationKey returns the Ed25519 attestation key of test service i,
// whose seed is SHA-256(label ‖ 0x00 ‖ uint64be(i)). It signs attestations
// and log events in tests only: anyone can forge what it signs.
func AttestationKey(i int) ed25519.PrivateKey {
	seed := digest(labelAttest, i)
	return ed25519.NewKeyFromSeed(seed[:])
}

// LogKey returns the signed-note key pair (skey signs, vkey verifies) of
// the test transparency log of origin LogOrigin: note.GenerateKey reading
// its Ed25519 seed from Rand("api test log key"). It is for tests and
// documented examples only: anyone can sign checkpoints with it.
func LogKey() (skey, vkey string) {
	skey, vkey, err := note.GenerateKey(Rand(seedLog), LogOrigin)
	if err != nil {
		panic("testkeys: " + err.Error()) // only a failing reader fails, and Rand never fails
	}
	return skey, vkey
}

// Rand returns a deterministic, endless byte stream for seed, to use in
// place of crypto/rand.Reader where salts and nonces must be reproducible.
// Block i of the stream is
// SHA-256(label ‖ 0x00 ‖ uint32be(len(seed)) ‖ seed ‖ uint64be(i)).
// It is not a secure random source: it is for tests only.
func Rand(seed string) io.Reader {
	return &stream{seed: seed}
}

type stream struct {
	seed    string
	counter uint64
	buf     []byte
}

func (s *stream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(s.buf) == 0 {
			b := make([]byte, 0, len(labelRand)+1+4+len(s.seed)+8)
			b = append(b, labelRand...)
			b = append(b, 0)
			b = binary.BigEndian.AppendUint32(b, uint32(len(s.seed)))
			b = append(b, s.seed...)
			b = binary.BigEndian.AppendUint64(b, s.counter)
			s.counter++
			block := sha256.Sum256(b)
			s.buf = block[:]
		}
		c := copy(p[n:], s.buf)
		s.buf = s.buf[c:]
		n += c
	}
	return n, nil
}
