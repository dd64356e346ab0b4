// Package jsonesc reads the escapes of a JSON string (RFC 8259 §7) the
// one way every strict reader of shredd takes them: the api's request
// decoder and bundle's evidence reader. A \u escape of a surrogate is text
// only as a high-low pair; a lone one is refused, as the evidence spec
// (docs/transparency.md) and the request rules (docs/api.md) require.
package jsonesc

import "errors"

var (
	// ErrSyntax is returned for an escape that is no escape of the
	// grammar: an unknown letter, too few or non-hex digits.
	ErrSyntax = errors.New("jsonesc: not a JSON escape")
	// ErrSurrogate is returned for a \u escape of a lone surrogate: a low
	// one, or a high one not followed by an escaped low one.
	ErrSurrogate = errors.New("jsonesc: a lone surrogate escape")
)

// Escape reads the escape at b[i], a backslash, and returns the rune it
// stands for and its length in bytes (2, 6, or 12 for a surrogate pair).
// It returns ErrSyntax or ErrSurrogate for anything else.
func Escape(b []byte, i int) (r rune, n int, err error) {
	if i+1 >= len(b) {
		return 0, 0, ErrSyntax
	}
	switch e := b[i+1]; e {
	case '"', '\\', '/':
		return rune(e), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		return unicode(b, i)
	}
	return 0, 0, ErrSyntax
}

// unicode reads the \u escape at b[i], and the escaped low surrogate that
// must follow a high one.
func unicode(b []byte, i int) (rune, int, error) {
	r, ok := Hex4(b, i+2)
	if !ok {
		return 0, 0, ErrSyntax
	}
	if r >= 0xdc00 && r <= 0xdfff {
		return 0, 0, ErrSurrogate
	}
	if r < 0xd800 || r > 0xdbff {
		return r, 6, nil
	}
	if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
		return 0, 0, ErrSurrogate
	}
	lo, ok := Hex4(b, i+8)
	if !ok {
		return 0, 0, ErrSyntax
	}
	if lo < 0xdc00 || lo > 0xdfff {
		return 0, 0, ErrSurrogate
	}
	return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), 12, nil
}

// Hex4 reads the 4 hex digits of a \u escape at b[i:], either case.
func Hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
