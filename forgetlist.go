package shredd

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// ForgetQuery selects a page of forgets for Eraser.ListForgets: newest
// first (by request time, then id), of one reported state when State is
// not "", at most Limit of them (1 to MaxForgetPage; 0 means
// MaxForgetPage), after the forget Cursor names ("" for the first page).
type ForgetQuery struct {
	State  string
	Limit  int
	Cursor string
}

// MaxForgetPage is the largest page of forgets ListForgets answers.
const MaxForgetPage = 1000

// ForgetPage is one page of forgets. Next is the cursor of the following
// page, "" on the last one. Counts holds how many forgets there are in
// each reported state (requested, committed, shredded, erased, blocked,
// overdue: every one present, 0 included), over all forgets, not only
// the page: the states partition the forgets, so the counts add up to
// their number.
type ForgetPage struct {
	Forgets []Forget
	Next    string
	Counts  map[string]int
}

// ForgetCursor is the position of a forget in the listing order: its
// request time and id. Its text form (String, ParseForgetCursor) is 32
// characters of unpadded base64url, opaque to clients.
type ForgetCursor struct {
	RequestedAt time.Time
	ID          ID
}

// String returns the text form of c.
func (c ForgetCursor) String() string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.RequestedAt.UnixNano()))
	copy(b[8:], c.ID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ParseForgetCursor parses the text form of a cursor; anything else is an
// error wrapping ErrInvalid.
func ParseForgetCursor(s string) (ForgetCursor, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 24 || base64.RawURLEncoding.EncodeToString(b) != s {
		return ForgetCursor{}, fmt.Errorf("shredd: malformed forget cursor: %w", ErrInvalid)
	}
	var c ForgetCursor
	c.RequestedAt = time.Unix(0, int64(binary.BigEndian.Uint64(b[:8]))).UTC()
	copy(c.ID[:], b[8:])
	return c, nil
}
