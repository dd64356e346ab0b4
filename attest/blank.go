package attest

// The evidence spec's character classes (docs/attestation.md §7, "Blank
// and space"), listed here as the spec lists them rather than taken from
// Go's unicode tables or any language's idea of a space: every reader, in
// every language, holds the same list, so that no two readers can
// disagree on whether a string is blank.

// invisible is the spec's INVISIBLE set: Unicode White_Space, the control
// characters (Cc), the format characters (Cf) and the default-ignorable
// code points, as of Unicode 15.1, as inclusive ranges in order.
var invisible = [][2]rune{
	{0x0000, 0x0020}, {0x007F, 0x00A0}, {0x00AD, 0x00AD}, {0x034F, 0x034F},
	{0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD}, {0x070F, 0x070F},
	{0x0890, 0x0891}, {0x08E2, 0x08E2}, {0x115F, 0x1160}, {0x1680, 0x1680},
	{0x17B4, 0x17B5}, {0x180B, 0x180F}, {0x2000, 0x200F}, {0x2028, 0x202F},
	{0x205F, 0x206F}, {0x3000, 0x3000}, {0x3164, 0x3164}, {0xFE00, 0xFE0F},
	{0xFEFF, 0xFEFF}, {0xFFA0, 0xFFA0}, {0xFFF0, 0xFFFB}, {0x110BD, 0x110BD},
	{0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
	{0xE0000, 0xE0FFF},
}

// space is the spec's WS set: Unicode White_Space, the code points a
// signed-note key name may not hold (with '+').
var space = [][2]rune{
	{0x0009, 0x000D}, {0x0020, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0},
	{0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
	{0x205F, 0x205F}, {0x3000, 0x3000},
}

func inRanges(r rune, rs [][2]rune) bool {
	for _, x := range rs {
		if r < x[0] {
			return false
		}
		if r <= x[1] {
			return true
		}
	}
	return false
}

// Invisible reports whether r is in the spec's INVISIBLE set.
func Invisible(r rune) bool { return inRanges(r, invisible) }

// Space reports whether r is in the spec's WS set (Unicode White_Space).
func Space(r rune) bool { return inRanges(r, space) }

// Blank reports whether s holds no code point outside the INVISIBLE set
// (the empty string is blank): the spec's rule for a condition's evidence
// and a residual's description, which must not be blank. Nothing is ever
// trimmed: " x " is not blank and is kept as it is. A byte that is not
// UTF-8 counts as visible (the JSON rules refuse it first).
func Blank(s string) bool {
	for _, r := range s {
		if !Invisible(r) {
			return false
		}
	}
	return true
}
