package envelope_test

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

var benchSizes = []int{256, 4 << 10, 64 << 10}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkSeal measures what a caller pays per artifact: NewHeader (salt
// and nonce from crypto/rand) and Seal, for a one-subject lineage.
func BenchmarkSeal(b *testing.B) {
	keys, refs := testkeys.Keys(1), testkeys.Lineage(1)
	for _, n := range benchSizes {
		pt := make([]byte, n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				h, err := envelope.NewHeader(nil, testkeys.Artifact(0), "episodic", refs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := envelope.Seal(h, keys, pt, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendSeal is Seal into a reused buffer (AppendSeal), to compare
// with the raw AEAD writing into a reused buffer.
func BenchmarkAppendSeal(b *testing.B) {
	keys, refs := testkeys.Keys(1), testkeys.Lineage(1)
	for _, n := range benchSizes {
		pt := make([]byte, n)
		buf := make([]byte, 0, n+1024)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				h, err := envelope.NewHeader(nil, testkeys.Artifact(0), "episodic", refs)
				if err != nil {
					b.Fatal(err)
				}
				if buf, err = envelope.AppendSeal(buf[:0], h, keys, pt, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures Open of a parsed one-subject envelope.
func BenchmarkOpen(b *testing.B) {
	keys, refs := testkeys.Keys(1), testkeys.Lineage(1)
	for _, n := range benchSizes {
		h, err := envelope.NewHeader(nil, testkeys.Artifact(0), "episodic", refs)
		if err != nil {
			b.Fatal(err)
		}
		e, err := envelope.Seal(h, keys, make([]byte, n), nil)
		if err != nil {
			b.Fatal(err)
		}
		if e, err = envelope.Parse(e.Marshal()); err != nil {
			b.Fatal(err)
		}
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := envelope.Open(e, keys, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawAESGCM is the baseline: AES-256-GCM Seal alone, with a fixed
// key set up once and a fixed nonce. "alloc" returns a new output slice on
// every call, as Seal must; "reuse" writes into one buffer, the ceiling.
func BenchmarkRawAESGCM(b *testing.B) {
	block, err := aes.NewCipher(testkeys.SubjectKey(0))
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	nonce := make([]byte, gcm.NonceSize())
	for _, reuse := range []bool{false, true} {
		name := "alloc"
		if reuse {
			name = "reuse"
		}
		for _, n := range benchSizes {
			pt := make([]byte, n)
			dst := make([]byte, 0, n+gcm.Overhead())
			b.Run(name+"/"+sizeName(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if reuse {
						dst = gcm.Seal(dst[:0], nonce, pt, nil)
					} else {
						dst = gcm.Seal(nil, nonce, pt, nil)
					}
				}
			})
		}
	}
}
