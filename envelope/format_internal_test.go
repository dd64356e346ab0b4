package envelope

import (
	"encoding/base64"
	"testing"
)

// TestSizes pins the sizes that docs/envelope.md states.
func TestSizes(t *testing.T) {
	if fixedHeaderSize != 69 {
		t.Errorf("fixed header size %d, the spec says 69", fixedHeaderSize)
	}
	if maxHeaderSize != 36997 {
		t.Errorf("largest header %d, the spec says 36997", maxHeaderSize)
	}
	if refSize != 36 {
		t.Errorf("ref size %d, the spec says 36", refSize)
	}
}

// TestText checks Text against Prefix and the whole of b encoded at once,
// across the lengths where its chunks and base64's groups of 3 meet.
func TestText(t *testing.T) {
	b := make([]byte, 4000)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	for n := 0; n <= len(b); n++ {
		if n > 40 && n < 760 || n > 800 && n < 1530 || n > 1560 && n < 3980 {
			continue
		}
		want := Prefix + base64.RawURLEncoding.EncodeToString(b[:n])
		if got := Text(b[:n]); got != want {
			t.Fatalf("Text of %d bytes = %q..., want %q...", n, got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = Text(b[:1100]) }); a != 1 {
		t.Errorf("Text allocates %v times, want 1", a)
	}
}
