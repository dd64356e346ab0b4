package translog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/mod/sumdb/note"
)

// This file implements C2SP tlog-cosignature (https://c2sp.org/tlog-cosignature),
// the Ed25519 "cosignature/v1" type: a witness's note signature on a
// checkpoint, which states that, as of its timestamp, the checkpoint is the
// largest consistent tree the witness has seen of that log.
//
// A cosignature is a signed-note signature line
//
//	— <witness name> base64(key ID || timestamp || Ed25519 signature)
//
// with a 4-byte key ID of SHA-256(<name> || "\n" || 0x04 || public key)[:4],
// an 8-byte big-endian POSIX timestamp, and an Ed25519 signature over
//
//	cosignature/v1
//	time <timestamp>
//	<the checkpoint's note text>
//
// golang.org/x/mod/sumdb/note knows only its own Ed25519 type (0x01), so
// the cosigner and its verifier here implement note.Signer and
// note.Verifier: note.Sign and note.Open then read and write cosignatures
// like any other signature line.

// CosignatureAlg is the signature type byte of an Ed25519 cosignature/v1
// key, in its key ID and its verifier key.
const CosignatureAlg = 0x04

// CosignatureHeader is the first line of the message a cosignature/v1
// signs, its domain separation.
const CosignatureHeader = "cosignature/v1"

// cosignatureSize is the length of a cosignature/v1 signature without its
// key ID: the timestamp and the Ed25519 signature.
const cosignatureSize = 8 + ed25519.SignatureSize

// ErrWitness reports a checkpoint with fewer valid cosignatures of trusted
// witnesses than required (see [CheckCosignatures]). It wraps ErrVerify.
var ErrWitness = fmt.Errorf("%w: not enough witness cosignatures", ErrVerify)

// cosignatureKeyHash is the key ID of an Ed25519 cosignature/v1 key.
func cosignatureKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{CosignatureAlg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// validKeyName is the signed-note rule for a key name: non-empty, no
// Unicode space and no plus sign (the separator of key encodings).
func validKeyName(name string) bool {
	return name != "" && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// CosignatureMessage returns the message a cosignature/v1 signs: the header
// line, the timestamp line and the checkpoint's note text (which ends in a
// newline and carries no signature line).
func CosignatureMessage(t uint64, text []byte) []byte {
	var b bytes.Buffer
	b.WriteString(CosignatureHeader + "\ntime " + strconv.FormatUint(t, 10) + "\n")
	b.Write(text)
	return b.Bytes()
}

// GenerateCosignerKey returns a new Ed25519 cosignature/v1 key pair for a
// witness named name (a schema-less URL such as "witness.example/w1"):
// skey, secret, to give to [NewCosigner], and vkey, a signed-note verifier
// key of type 0x04 ("<name>+<key ID>+<base64(0x04 || public key)>") to
// publish and give to [NewCosignatureVerifier].
func GenerateCosignerKey(name string) (skey, vkey string, err error) {
	if !validKeyName(name) {
		return "", "", fmt.Errorf("translog: generate cosigner key: %w: invalid name %q", ErrFormat, name)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("translog: generate cosigner key: %w", err)
	}
	h := fmt.Sprintf("%08x", cosignatureKeyHash(name, pub))
	skey = "PRIVATE+KEY+" + name + "+" + h + "+" + base64.StdEncoding.EncodeToString(append([]byte{CosignatureAlg}, priv.Seed()...))
	vkey = name + "+" + h + "+" + base64.StdEncoding.EncodeToString(append([]byte{CosignatureAlg}, pub...))
	return skey, vkey, nil
}

// parseKey splits a signed-note key encoding "<name>+<hex key ID>+<base64
// (0x04 || key)>" and checks its type and length.
func parseKey(enc string, size int) (name string, hash uint32, key []byte, err error) {
	name, rest, ok1 := strings.Cut(enc, "+")
	h, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validKeyName(name) || len(h) != 8 || strings.ToLower(h) != h {
		return "", 0, nil, errors.New("not <name>+<key id>+<key>")
	}
	hb, err := hex.DecodeString(h)
	if err != nil {
		return "", 0, nil, errors.New("key id is not 8 hex digits")
	}
	raw, err := decodeBase64(b64)
	if err != nil || len(raw) != 1+size || raw[0] != CosignatureAlg {
		return "", 0, nil, fmt.Errorf("not a cosignature/v1 Ed25519 key (type 0x%02x, %d bytes)", CosignatureAlg, size)
	}
	return name, binary.BigEndian.Uint32(hb), raw[1:], nil
}

// NewCosigner returns the note.Signer of the cosignature/v1 key skey (as
// [GenerateCosignerKey] encodes it). Each signature it makes is
// timestamped with now(), in whole seconds; now may be nil for
// time.Now.
func NewCosigner(skey string, now func() time.Time) (note.Signer, error) {
	rest, ok := strings.CutPrefix(skey, "PRIVATE+KEY+")
	if !ok {
		return nil, fmt.Errorf("translog: cosigner key: %w: no PRIVATE+KEY+ prefix", ErrFormat)
	}
	name, hash, seed, err := parseKey(rest, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("translog: cosigner key: %w: %v", ErrFormat, err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if cosignatureKeyHash(name, priv.Public().(ed25519.PublicKey)) != hash {
		return nil, fmt.Errorf("translog: cosigner key: %w: key id does not match the key", ErrFormat)
	}
	if now == nil {
		now = time.Now
	}
	return &cosigner{name: name, hash: hash, key: priv, now: now}, nil
}

type cosigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
	now  func() time.Time
}

var _ note.Signer = (*cosigner)(nil)

func (s *cosigner) Name() string    { return s.name }
func (s *cosigner) KeyHash() uint32 { return s.hash }

// Sign signs the checkpoint text msg as of now: the timestamp, then the
// Ed25519 signature of the cosignature/v1 message.
func (s *cosigner) Sign(msg []byte) ([]byte, error) {
	t := s.now().Unix()
	if t < 0 {
		return nil, errors.New("translog: cosign: clock before 1970")
	}
	sig := binary.BigEndian.AppendUint64(make([]byte, 0, cosignatureSize), uint64(t))
	return append(sig, ed25519.Sign(s.key, CosignatureMessage(uint64(t), msg))...), nil
}

// CosignerVerifierKey returns the verifier key of a cosigner made by
// [NewCosigner], in the encoding of [GenerateCosignerKey].
func CosignerVerifierKey(s note.Signer) (string, error) {
	c, ok := s.(*cosigner)
	if !ok {
		return "", fmt.Errorf("translog: %T is not a cosignature/v1 signer", s)
	}
	pub := c.key.Public().(ed25519.PublicKey)
	return fmt.Sprintf("%s+%08x+%s", c.name, c.hash, base64.StdEncoding.EncodeToString(append([]byte{CosignatureAlg}, pub...))), nil
}

// NewCosignatureVerifier returns the note.Verifier of a witness's
// cosignature/v1 verifier key vkey (type 0x04; see [GenerateCosignerKey]).
// Its Verify accepts a signature of a note text msg when it is a
// timestamp of at most 2^63-1 followed by a valid Ed25519 signature of
// [CosignatureMessage]. It returns an error wrapping [ErrFormat] for any
// other key, an Ed25519 note key of type 0x01 included.
func NewCosignatureVerifier(vkey string) (note.Verifier, error) {
	name, hash, pub, err := parseKey(strings.TrimSpace(vkey), ed25519.PublicKeySize)
	if err != nil {
		return nil, fmt.Errorf("translog: witness key: %w: %v", ErrFormat, err)
	}
	if cosignatureKeyHash(name, pub) != hash {
		return nil, fmt.Errorf("translog: witness key: %w: key id does not match the key", ErrFormat)
	}
	return &cosignatureVerifier{name: name, hash: hash, key: ed25519.PublicKey(pub)}, nil
}

type cosignatureVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

var _ note.Verifier = (*cosignatureVerifier)(nil)

func (v *cosignatureVerifier) Name() string    { return v.name }
func (v *cosignatureVerifier) KeyHash() uint32 { return v.hash }

func (v *cosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != cosignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	return ed25519.Verify(v.key, CosignatureMessage(t, msg), sig[8:])
}

// A Cosignature is one witness's valid cosignature of a checkpoint.
type Cosignature struct {
	Witness string    // the witness's key name
	Time    time.Time // when the witness signed, as it says (UTC, seconds)
	// Seconds is the cosignature's timestamp as signed: POSIX seconds, 0
	// to 2^63-1, exact where Time cannot hold it (beyond the year 292e9).
	Seconds int64
}

// A WitnessReport says which trusted witnesses cosigned a checkpoint.
type WitnessReport struct {
	Valid   []Cosignature // valid cosignatures, in the order of the witnesses given
	Missing []string      // trusted witnesses with no signature line on the checkpoint
	Invalid []string      // trusted witnesses whose signature line does not verify
}

// CheckCosignatures checks that the signed checkpoint signed carries
// valid cosignatures of at least required of the trusted witnesses
// (cosignature/v1 verifiers, see [NewCosignatureVerifier]), after opening
// it with the log's key log as [OpenCheckpoint] does. Signature lines of
// other keys are ignored; a trusted witness's line that does not verify
// counts as no cosignature and is reported as invalid. Two witnesses with
// the same public key count once (the cosignature/v1 message does not
// commit to the name, so a key with two names is one witness). It returns
// the checkpoint and the report; fewer than required valid cosignatures
// is an error wrapping [ErrWitness] (and [ErrVerify]) that names the
// witnesses missing or invalid.
func CheckCosignatures(signed []byte, log note.Verifier, witnesses []note.Verifier, required int) (Checkpoint, *WitnessReport, error) {
	c, err := OpenCheckpoint(signed, log)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	rep := new(WitnessReport)
	var seen [][]byte
	for _, w := range witnesses {
		if cv, ok := w.(*cosignatureVerifier); ok {
			if slices.ContainsFunc(seen, func(k []byte) bool { return bytes.Equal(k, cv.key) }) {
				continue
			}
			seen = append(seen, cv.key)
		}
		n, err := note.Open(signed, note.VerifierList(w))
		var invalid *note.InvalidSignatureError
		switch {
		case err == nil && len(n.Sigs) == 1:
			t := cosignatureTime(n.Sigs[0].Base64)
			rep.Valid = append(rep.Valid, Cosignature{Witness: w.Name(), Time: time.Unix(t, 0).UTC(), Seconds: t})
		case errors.As(err, &invalid):
			rep.Invalid = append(rep.Invalid, w.Name())
		default:
			rep.Missing = append(rep.Missing, w.Name())
		}
	}
	if len(rep.Valid) < required {
		var why []string
		if len(rep.Missing) > 0 {
			why = append(why, "none from "+strings.Join(rep.Missing, ", "))
		}
		if len(rep.Invalid) > 0 {
			why = append(why, "an invalid one from "+strings.Join(rep.Invalid, ", "))
		}
		detail := ""
		if len(why) > 0 {
			detail = " (" + strings.Join(why, "; ") + ")"
		}
		return c, rep, fmt.Errorf("translog: checkpoint of tree %d: %w: %d valid of the %d required%s",
			c.Size, ErrWitness, len(rep.Valid), required, detail)
	}
	return c, rep, nil
}

// cosignatureTime reads the timestamp of a verified cosignature line's
// base64 (key ID, timestamp, signature).
func cosignatureTime(b64 string) int64 {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) < 12 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b[4:12]))
}
