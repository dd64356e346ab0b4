package envelope

import "testing"

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
