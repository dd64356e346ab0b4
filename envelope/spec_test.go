package envelope_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
)

// TestSpecIndependent opens every success vector with a second, minimal
// implementation written from docs/envelope.md alone: it shares no code
// with package envelope (stdlib crypto/hkdf instead of x/crypto/hkdf, field
// offsets instead of the parser), so a mismatch between code and spec shows.
func TestSpecIndependent(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.expect != "success" {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			b64, ok := strings.CutPrefix(v.text, "shredd:v1:")
			if !ok {
				t.Fatal("no prefix")
			}
			b, err := base64.RawURLEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			// magic(4) version(1) alg(1) artifact(16) kindLen(1) kind
			// count(2) count×(sid(32) gen(4)) salt(32) nonce(12) | ciphertext
			if string(b[:4]) != "SHRD" || b[4] != 1 || b[5] != 1 {
				t.Fatalf("magic/version/alg % x", b[:6])
			}
			off := 22
			kindLen := int(b[off])
			off++
			if kind := string(b[off : off+kindLen]); kind != v.kind {
				t.Fatalf("kind %q", kind)
			}
			off += kindLen
			count := int(binary.BigEndian.Uint16(b[off:]))
			off += 2
			keyOf := make(map[string][]byte)
			for i, k := range v.keys {
				var ref [36]byte
				copy(ref[:], v.lineage[i].SID[:])
				binary.BigEndian.PutUint32(ref[32:], v.lineage[i].Gen)
				keyOf[string(ref[:])] = k
			}
			var ikm []byte
			for i := range count {
				ref := b[off+36*i : off+36*(i+1)]
				k, ok := keyOf[string(ref)]
				if !ok {
					t.Fatalf("no key for header ref %d", i)
				}
				ikm = append(ikm, k...)
			}
			off += 36 * count
			salt := b[off : off+32]
			nonce := b[off+32 : off+44]
			hdr := b[:off+44]
			ct := b[off+44:]

			info := append([]byte("shredd/v1/artifact-key\x00"), hdr...)
			key, err := hkdf.Key(sha256.New, ikm, salt, string(info), 32)
			if err != nil {
				t.Fatal(err)
			}
			block, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			gcm, err := cipher.NewGCM(block)
			if err != nil {
				t.Fatal(err)
			}
			ad := append([]byte("shredd/v1/aad\x00"), hdr...)
			ad = binary.BigEndian.AppendUint32(ad, uint32(len(v.context)))
			ad = append(ad, v.context...)
			pt, err := gcm.Open(nil, nonce, ct, ad)
			if err != nil {
				t.Fatalf("independent open: %v", err)
			}
			if !bytes.Equal(pt, v.plaintext) {
				t.Fatalf("independent open: plaintext %x, want %x", pt, v.plaintext)
			}
			if again := gcm.Seal(nil, nonce, pt, ad); !bytes.Equal(again, ct) {
				t.Fatal("independent seal gives a different ciphertext")
			}
		})
	}
}
