package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/translog"
)

// This file reads signed notes (the checkpoint, a saved checkpoint, their
// cosignatures) and verifier keys byte for byte, as the spec says
// (docs/transparency.md §10a.1, §10a.8): not through
// golang.org/x/mod/sumdb/note, whose Open skips a second line of a key
// it has verified unchecked and decodes base64 that skips line breaks
// and non-zero padding bits. Every reader in every language implements
// these same small rules.

const (
	noteAlgEd25519 = 0x01 // the signed-note type byte of an Ed25519 key
	maxNoteSigs    = 100  // signature lines of one note
)

// keyLine is a parsed verifier key "<name>+<key hash>+<base64 key>".
type keyLine struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

// sigLine is one signature line "— <name> <base64>" of a note.
type sigLine struct {
	name string
	hash uint32
	sig  []byte // after the key hash
}

// validNoteName is the spec's rule for a key name: non-empty, UTF-8, no
// code point of the WS set (attest.Space) and no '+'.
func validNoteName(name string) bool {
	if name == "" || !utf8.ValidString(name) || strings.Contains(name, "+") {
		return false
	}
	for _, r := range name {
		if attest.Space(r) {
			return false
		}
	}
	return true
}

// decodeBase64 decodes canonical standard base64 with padding: only the
// 64 characters and '=', a length that is a multiple of 4, zero unused
// bits. Go's decoder alone would skip CR and LF.
func decodeBase64(s string) ([]byte, bool) {
	if len(s)%4 != 0 {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return nil, false
		}
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

// keyHash is the signed-note key hash of a key of type alg.
func keyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// parseKeyLine reads a verifier key of type alg: a valid name, exactly 8
// lower-case hex digits that are the key's hash, and the canonical base64
// of alg and a 32-byte Ed25519 key. Nothing before or after.
func parseKeyLine(s string, alg byte) (keyLine, bool) {
	name, rest, ok1 := strings.Cut(s, "+")
	h, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validNoteName(name) || len(h) != 8 {
		return keyLine{}, false
	}
	for i := 0; i < len(h); i++ {
		if !('0' <= h[i] && h[i] <= '9' || 'a' <= h[i] && h[i] <= 'f') {
			return keyLine{}, false
		}
	}
	hash, _ := strconv.ParseUint(h, 16, 32)
	raw, ok := decodeBase64(b64)
	if !ok || len(raw) != 1+ed25519.PublicKeySize || raw[0] != alg || keyHash(name, alg, raw[1:]) != uint32(hash) {
		return keyLine{}, false
	}
	return keyLine{name: name, hash: uint32(hash), pub: ed25519.PublicKey(raw[1:])}, true
}

// oneLine returns the line of a one-line key file: its bytes, or its
// bytes but one final LF. ok is false for an empty line or another LF.
func oneLine(b []byte) (string, bool) {
	s := strings.TrimSuffix(string(b), "\n") // the one LF the spec allows
	return s, s != "" && !strings.Contains(s, "\n")
}

// parseNote splits a signed note into its text and signature lines
// (§10a.8, rules 1 to 4): UTF-8 without BOM (checkText), no byte below
// 0x20 but LF, the text up to the last empty line, at most 100 signature
// lines "— <name> <base64>", each a valid name and canonical base64 of at
// least 5 bytes, and no two lines of one name and key hash. Anything
// else is format.
func parseNote(b []byte, format string) ([]byte, []sigLine, error) {
	if err := checkText(b); err != nil {
		return nil, nil, err
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' {
			return nil, nil, formatError(format, "a control character in the note")
		}
	}
	split := bytes.LastIndex(b, []byte("\n\n"))
	if split < 0 {
		return nil, nil, formatError(format, "no signature block")
	}
	text, block := b[:split+1], b[split+2:]
	if len(block) == 0 || block[len(block)-1] != '\n' {
		return nil, nil, formatError(format, "no signature line, or a last line without LF")
	}
	var sigs []sigLine
	seen := map[[2]string]bool{}
	for _, line := range strings.SplitAfter(string(block[:len(block)-1]), "\n") {
		line = strings.TrimSuffix(line, "\n")
		rest, ok := strings.CutPrefix(line, "— ")
		name, b64, ok2 := strings.Cut(rest, " ")
		sig, ok3 := decodeBase64(b64)
		if !ok || !ok2 || !validNoteName(name) || !ok3 || len(sig) < 5 {
			return nil, nil, formatError(format, "a malformed signature line")
		}
		if len(sigs) == maxNoteSigs {
			return nil, nil, formatError(format, "more than %d signature lines", maxNoteSigs)
		}
		s := sigLine{name: name, hash: binary.BigEndian.Uint32(sig), sig: sig[4:]}
		k := [2]string{name, string(sig[:4])}
		if seen[k] {
			return nil, nil, formatError(format, "two signature lines of key %s", name)
		}
		seen[k] = true
		sigs = append(sigs, s)
	}
	return text, sigs, nil
}

// find returns the signature line of key k, or nil.
func find(sigs []sigLine, k keyLine) *sigLine {
	for i := range sigs {
		if sigs[i].name == k.name && sigs[i].hash == k.hash {
			return &sigs[i]
		}
	}
	return nil
}

// openNote opens a signed checkpoint with the log key (§10a.8): parseNote,
// the log key's line present and valid (signature), the text a
// checkpoint with a size within MaxSafeInteger (format), of the key's
// origin (origin). It returns the checkpoint, its text and its lines.
func openNote(b []byte, log keyLine, format, signature, origin string) (translog.Checkpoint, []byte, []sigLine, error) {
	text, sigs, err := parseNote(b, format)
	if err != nil {
		return translog.Checkpoint{}, nil, nil, err
	}
	s := find(sigs, log)
	if s == nil || len(s.sig) != ed25519.SignatureSize || !ed25519.Verify(log.pub, text, s.sig) {
		return translog.Checkpoint{}, nil, nil, verifyError(signature, nil, "verification failed: no valid signature by the log key")
	}
	c, err := translog.ParseCheckpoint(text)
	if err != nil || c.Size > MaxSafeInteger {
		return translog.Checkpoint{}, nil, nil, formatError(format, "malformed checkpoint")
	}
	if c.Origin != log.name {
		return translog.Checkpoint{}, nil, nil, verifyError(origin, nil, "verification failed: origin %q signed by key %q", c.Origin, log.name)
	}
	return c, text, sigs, nil
}

// cosignatureLen is a cosignature/v1 signature after its key ID: an
// 8-byte timestamp and an Ed25519 signature.
const cosignatureLen = 8 + ed25519.SignatureSize

// checkWitnesses sorts the trusted witnesses into those whose
// cosignature line is valid (§10a.8 rule 8, §13.1), invalid or missing.
// A line that does not verify counts as none.
func checkWitnesses(text []byte, sigs []sigLine, witnesses []keyLine) *translog.WitnessReport {
	rep := new(translog.WitnessReport)
	for _, w := range witnesses {
		s := find(sigs, w)
		switch {
		case s == nil:
			rep.Missing = append(rep.Missing, w.name)
		case len(s.sig) == cosignatureLen && binary.BigEndian.Uint64(s.sig) <= math.MaxInt64 &&
			ed25519.Verify(w.pub, translog.CosignatureMessage(binary.BigEndian.Uint64(s.sig), text), s.sig[8:]):
			t := int64(binary.BigEndian.Uint64(s.sig))
			rep.Valid = append(rep.Valid, translog.Cosignature{Witness: w.name, Time: time.Unix(t, 0).UTC(), Seconds: t})
		default:
			rep.Invalid = append(rep.Invalid, w.name)
		}
	}
	return rep
}

// CheckWitnessKeyFile reads a witness's cosignature/v1 verifier key as
// given to a verifier, a file or the key itself (§10a.1): UTF-8 without
// BOM, one line "<name>+<key ID>+<base64 of 0x04 and the key>",
// optionally followed by one LF; else witness.format.
func CheckWitnessKeyFile(b []byte) error {
	_, err := witnessKey(b)
	return err
}

func witnessKey(b []byte) (keyLine, error) {
	if err := checkText(b); err != nil {
		return keyLine{}, err
	}
	s, ok := oneLine(b)
	k, ok2 := parseKeyLine(s, translog.CosignatureAlg)
	if !ok || !ok2 {
		return keyLine{}, formatError(ReasonWitnessFormat, "not one cosignature/v1 verifier key line")
	}
	return k, nil
}

// witnessKeys reads the witness key files given (witnessKey); two with
// one public key, or one name and key ID, are witness.duplicate: a key
// with two names would count twice, as cosignature/v1 does not sign the
// name.
func witnessKeys(files [][]byte) ([]keyLine, error) {
	var out []keyLine
	for i, f := range files {
		k, err := witnessKey(f)
		if err != nil {
			return nil, within("witness key "+strconv.Itoa(i+1), err)
		}
		for _, o := range out {
			if o.pub.Equal(k.pub) || o.name == k.name && o.hash == k.hash {
				return nil, formatError(ReasonWitnessDuplicate, "witness keys %s and %s: the same key given twice", o.name, k.name)
			}
		}
		out = append(out, k)
	}
	return out, nil
}
