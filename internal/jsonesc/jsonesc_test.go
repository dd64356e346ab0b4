package jsonesc

import (
	"errors"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct {
		in   string
		r    rune
		n    int
		want error
	}{
		{`\"`, '"', 2, nil}, {`\\`, '\\', 2, nil}, {`\/`, '/', 2, nil},
		{`\b`, '\b', 2, nil}, {`\f`, '\f', 2, nil}, {`\n`, '\n', 2, nil},
		{`\r`, '\r', 2, nil}, {`\t`, '\t', 2, nil},
		{`\u00e9x`, 'é', 6, nil}, {`\u00E9`, 'é', 6, nil},
		{`\ud83d\ude00`, '😀', 12, nil},
		{`\`, 0, 0, ErrSyntax}, {`\x`, 0, 0, ErrSyntax}, {`\u12`, 0, 0, ErrSyntax},
		{`\u12g4`, 0, 0, ErrSyntax}, {`\ud83d\u12`, 0, 0, ErrSyntax},
		{`\ude00`, 0, 0, ErrSurrogate}, {`\ud83d`, 0, 0, ErrSurrogate},
		{`\ud83dx\ude00`, 0, 0, ErrSurrogate}, {`\ud83d\u0041`, 0, 0, ErrSurrogate},
	} {
		r, n, err := Escape([]byte(c.in), 0)
		if !errors.Is(err, c.want) || r != c.r || n != c.n {
			t.Errorf("Escape(%q) = %q, %d, %v; want %q, %d, %v", c.in, r, n, err, c.r, c.n, c.want)
		}
	}
}
