package api

import (
	"encoding/base64"
	"testing"
)

// TestB64String checks b64String against EncodeToString across the
// lengths where its chunks and base64's groups of 3 meet.
func TestB64String(t *testing.T) {
	b := make([]byte, 3000)
	for i := range b {
		b[i] = byte(i*13 + i>>8)
	}
	for n := 0; n <= len(b); n++ {
		if n > 40 && n < 760 || n > 800 && n < 1530 || n > 1560 && n < 2980 {
			continue
		}
		if got, want := b64String(b[:n]), base64.StdEncoding.EncodeToString(b[:n]); got != want {
			t.Fatalf("b64String of %d bytes = %q, want %q", n, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = b64String(b[:1024]) }); a != 1 {
		t.Errorf("b64String allocates %v times, want 1", a)
	}
}
