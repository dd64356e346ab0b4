package api

import (
	"bytes"
	"unicode/utf8"

	"github.com/shredd/shredd/internal/jsonesc"
)

// The bodies of the hot routes (POST /v1/encrypt, /v1/decrypt, /v1/datakey
// and /v1/artifacts) are decoded by hand, without reflection: a lexer over
// the bytes that knows the few request types and accepts only what the
// strict decoder (checkStrict, then encoding/json) accepts, with the same
// result. It answers "accepted" or "not sure", never a refusal of its own:
// for any body it does not accept, the reflective path runs on the same
// bytes and says what is wrong. So the refusals of the hot routes are
// those of the strict decoder by construction, and the lexer need only
// never accept a body that the strict decoder refuses, nor decode one
// differently (FuzzDecoderDifferential checks both). A refusal costs a
// second pass; a refusal is the rare case.
//
// What the lexer accepts: one object, then only whitespace; keys without
// escapes, each a field of the type spelt exactly, each at most once;
// string fields holding a string or null; string list fields holding null
// or an array of strings; strings with any JSON escape, a surrogate pair
// included, that decode to valid UTF-8. Everything else (numbers, bools,
// null in a list, escaped keys, a lone surrogate, invalid UTF-8, any
// syntax error) is left to the reflective path, which refuses most of it
// and accepts the rest (an escaped key, a null list item) slowly.
//
// An encrypt's plaintext is the one value the lexer decodes further: its
// base64, when it holds no escape and is strict, goes straight from the
// body into a buffer of its own (lexer.b64, encryptRequest.plain), which
// the handler clears after sealing, as it clears what b64 decodes. The
// body's buffer is cleared too (putBody), so no copy of the plaintext's
// text is left for the collector. The differential fuzz target compares
// the two paths with that buffer encoded again.

// hotRequest is a request type with a hand-written decoder.
type hotRequest interface {
	// hotField decodes the value at l of the member named key (a key
	// without escapes), marking the field as read (lexer.once). It reports
	// false when key is no field, names a field read already, or its value
	// is not one the lexer accepts for the field.
	hotField(l *lexer, key []byte) bool
}

var (
	_ hotRequest = (*encryptRequest)(nil)
	_ hotRequest = (*decryptRequest)(nil)
	_ hotRequest = (*sourceBody)(nil)
)

func (r *encryptRequest) hotField(l *lexer, key []byte) bool {
	switch string(key) {
	case "subject":
		return l.once(0) && l.str(&r.Subject)
	case "subjects":
		return l.once(1) && l.strs(&r.Subjects)
	case "parents":
		return l.once(2) && l.strs(&r.Parents)
	case "leases":
		return l.once(3) && l.strs(&r.Leases)
	case "kind":
		return l.once(4) && l.str(&r.Kind)
	case "holder":
		return l.once(5) && l.str(&r.Holder)
	case "plaintext":
		return l.once(6) && l.b64(&r.Plaintext, &r.plain)
	case "context":
		return l.once(7) && l.str(&r.Context)
	case "unit":
		return l.once(8) && l.str(&r.Unit)
	case "independent_of":
		return l.once(9) && l.strs(&r.IndependentOf)
	}
	return false // independent (a bool) takes the reflective path
}

func (r *decryptRequest) hotField(l *lexer, key []byte) bool {
	switch string(key) {
	case "ciphertext":
		return l.once(0) && l.str(&r.Ciphertext)
	case "context":
		return l.once(1) && l.str(&r.Context)
	case "holder":
		return l.once(2) && l.str(&r.Holder)
	case "unit":
		return l.once(3) && l.str(&r.Unit)
	}
	return false
}

func (r *sourceBody) hotField(l *lexer, key []byte) bool {
	switch string(key) {
	case "subject":
		return l.once(0) && l.str(&r.Subject)
	case "subjects":
		return l.once(1) && l.strs(&r.Subjects)
	case "parents":
		return l.once(2) && l.strs(&r.Parents)
	case "leases":
		return l.once(3) && l.strs(&r.Leases)
	case "kind":
		return l.once(4) && l.str(&r.Kind)
	case "holder":
		return l.once(5) && l.str(&r.Holder)
	case "unit":
		return l.once(6) && l.str(&r.Unit)
	case "independent_of":
		return l.once(7) && l.strs(&r.IndependentOf)
	}
	return false // independent (a bool) takes the reflective path
}

// once marks field bit of the object being read, and reports false when
// it was marked: a key given twice, which the strict decoder refuses.
func (l *lexer) once(bit uint) bool {
	if l.seen&(1<<bit) != 0 {
		return false
	}
	l.seen |= 1 << bit
	return true
}

// wiper is a request that may hold a secret decoded by the lexer
// (encryptRequest.plain), cleared by wipe.
type wiper interface{ wipe() }

// wipe clears the secrets of v, a request the lexer read in part or whole.
func wipe(v any) {
	if w, ok := v.(wiper); ok {
		w.wipe()
	}
}

// decodeHot decodes body into v when v is a hot request type and the lexer
// accepts body, and reports whether it did. On false, v may hold part of
// the body: the caller resets it before the reflective path runs.
func decodeHot[Req any](body []byte, v *Req) bool {
	hr, ok := any(v).(hotRequest)
	if !ok {
		return false
	}
	l := lexer{b: body}
	return l.request(hr) && l.end()
}

// decodeCallHot is decodeCall's fast path: a single request into single
// (items nil), or a batch_input of 1 to MaxBatch objects and nothing else.
// It makes the same choice between the two as decodeCallReflect: a body
// that holds the bytes "batch_input" anywhere is a batch or is left to the
// reflective path.
func decodeCallHot[Req any](body []byte, single *Req) (items []*Req, ok bool) {
	if !bytes.Contains(body, []byte(`"batch_input"`)) {
		if !decodeHot(body, single) {
			wipe(single)
			return nil, false
		}
		return nil, true
	}
	if _, ok := any(single).(hotRequest); !ok {
		return nil, false
	}
	l := lexer{b: body}
	l.ws()
	if !l.eat('{') {
		return nil, false
	}
	l.ws()
	if key, ok := l.key(); !ok || string(key) != "batch_input" {
		return nil, false
	}
	l.ws()
	if !l.eat(':') {
		return nil, false
	}
	l.ws()
	if !l.eat('[') {
		return nil, false
	}
	// The items go into one array, and the pointers into it are taken at
	// the end, once it no longer moves. Each item opens with a '{': their
	// count bounds the items, so that the array is allocated once.
	reqs := make([]Req, 0, min(bytes.Count(body, []byte{'{'}), MaxBatch))
	defer func() {
		if !ok {
			for i := range reqs {
				wipe(&reqs[i])
			}
		}
	}()
	for {
		l.ws()
		if len(reqs) == MaxBatch {
			return nil, false // 413: the reflective path says so
		}
		reqs = append(reqs, *new(Req))
		if !l.request(any(&reqs[len(reqs)-1]).(hotRequest)) {
			return nil, false
		}
		l.ws()
		if l.eat(']') {
			break
		}
		if !l.eat(',') {
			return nil, false
		}
	}
	l.ws()
	if !l.eat('}') || !l.end() {
		return nil, false
	}
	items = make([]*Req, len(reqs))
	for i := range reqs {
		items[i] = &reqs[i]
	}
	return items, true
}

// lexer reads the bytes of a hot request body from i. Its methods report
// false for whatever they do not accept, leaving i anywhere.
type lexer struct {
	b []byte
	i int
	// seen marks the fields of the request being read (requests do not
	// nest): kept here, not on request's stack, as the lexer already goes
	// to the heap through hotField's interface call.
	seen uint32
}

func (l *lexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// eat consumes c if it is next.
func (l *lexer) eat(c byte) bool {
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// end reports whether only whitespace follows.
func (l *lexer) end() bool {
	l.ws()
	return l.i == len(l.b)
}

// request reads one object into r.
func (l *lexer) request(r hotRequest) bool {
	l.ws()
	if !l.eat('{') {
		return false
	}
	l.ws()
	if l.eat('}') {
		return true
	}
	l.seen = 0
	for {
		key, ok := l.key()
		if !ok {
			return false
		}
		l.ws()
		if !l.eat(':') {
			return false
		}
		l.ws()
		if !r.hotField(l, key) {
			return false
		}
		l.ws()
		if l.eat('}') {
			return true
		}
		if !l.eat(',') {
			return false
		}
		l.ws()
	}
}

// key reads an object's key without escapes; the key aliases the body and
// is only compared, never kept.
func (l *lexer) key() ([]byte, bool) {
	if !l.eat('"') {
		return nil, false
	}
	n := bytes.IndexByte(l.b[l.i:], '"')
	if n < 0 {
		return nil, false
	}
	k := l.b[l.i : l.i+n]
	if bytes.IndexByte(k, '\\') >= 0 {
		return nil, false // an escaped key: the reflective path unescapes it
	}
	l.i += n + 1
	return k, true
}

// null consumes the literal null if it is next.
func (l *lexer) null() bool {
	if bytes.HasPrefix(l.b[l.i:], []byte("null")) {
		l.i += 4
		return true
	}
	return false
}

// str reads a string field: a string, or null, which leaves the field as
// it is, as encoding/json does (zero: a field is read once).
func (l *lexer) str(dst *string) bool {
	if l.null() {
		return true
	}
	s, ok := l.string()
	*dst = s
	return ok
}

// b64 reads a base64 field into out, decoded: a string of plain bytes
// (no escape: the usual case) that is strict base64 is decoded straight
// out of the body, so that no copy of its text outlives the body's buffer
// (encryptRequest.plain). Any other string goes into dst as str reads it,
// for b64 (the function) to decode or refuse as the reflective path's
// value is; null leaves both as they are.
func (l *lexer) b64(dst *string, out *[]byte) bool {
	if l.null() {
		return true
	}
	src, isRaw, text, ok := l.rawString()
	if !isRaw {
		*dst = text
		return ok
	}
	buf := make([]byte, strictBase64.DecodedLen(len(src)))
	n, err := strictBase64.Decode(buf, src)
	if err != nil {
		clear(buf)
		*dst = string(src)
		return true
	}
	*out = buf[:n]
	return true
}

// strs reads a string list field: null (nil, as encoding/json sets it),
// or an array of strings ([] is an empty list, not nil, as encoding/json
// makes it).
func (l *lexer) strs(dst *[]string) bool {
	if l.null() {
		*dst = nil
		return true
	}
	if !l.eat('[') {
		return false
	}
	l.ws()
	out := []string{}
	if l.eat(']') {
		*dst = out
		return true
	}
	for {
		s, ok := l.string()
		if !ok {
			return false
		}
		out = append(out, s)
		l.ws()
		if l.eat(']') {
			*dst = out
			return true
		}
		if !l.eat(',') {
			return false
		}
		l.ws()
	}
}

// string reads a string and returns its text: a copy, never aliasing the
// body, which goes back to a pool once decoded (bodyPool).
func (l *lexer) string() (string, bool) {
	raw, isRaw, text, ok := l.rawString()
	if isRaw {
		return string(raw), true
	}
	return text, ok
}

// rawString reads a string. One of plain bytes only (no escape: the usual
// case) comes back as those bytes, aliasing the body, with isRaw true;
// any other as its text (stringSlow), with ok false when it is not one the
// lexer accepts.
func (l *lexer) rawString() (raw []byte, isRaw bool, text string, ok bool) {
	if !l.eat('"') {
		return nil, false, "", false
	}
	b, start := l.b, l.i
	i := start
	for i < len(b) && plain[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		l.i = i + 1
		return b[start:i], true, "", true
	}
	text, ok = l.stringSlow(start, i)
	return nil, false, text, ok
}

// stringSlow reads the rest of a string that holds an escape or a byte
// outside printable ASCII, from i, start being its first byte.
func (l *lexer) stringSlow(start, i int) (string, bool) {
	b := l.b
	out := make([]byte, 0, i-start+16)
	out = append(out, b[start:i]...)
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			l.i = i + 1
			return string(out), true
		case c == '\\':
			r, n, err := jsonesc.Escape(b, i)
			if err != nil {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += n
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			out = append(out, b[i:i+size]...)
			i += size
		}
	}
	return "", false
}
