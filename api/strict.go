package api

import (
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/shredd/shredd/internal/jsonesc"
)

// MaxDepth bounds the nesting of a JSON request body (objects and arrays).
// The deepest valid request, a batch item's subjects, is 4 levels deep; the
// bound refuses pathological bodies before encoding/json recurses into them.
const MaxDepth = 32

// checkStrict refuses what encoding/json would accept silently and turn
// into something the client did not send: invalid UTF-8 and escaped lone
// surrogates (both become U+FFFD, so two different subject ids could name
// one subject), a key twice in one object (the last wins, so
// {"subject":"A","subject":"B"} would forget A), and a key that names a
// field of v only up to case ("Subject"). It also refuses nesting deeper
// than MaxDepth and keys unknown to v.
//
// It walks body once, guided by the type of v, before encoding/json does.
// On a syntax error it stops and returns nil: the decoder then reports the
// error with its offset, so that there is one wording for bad syntax.
// Errors name a field only by the names of v's own fields (fieldNameRe),
// never by a key or value the client wrote.
func checkStrict(body []byte, v any) error {
	sc := scanner{b: body}
	err := sc.value(shapeOf(reflect.TypeOf(v)))
	if errors.Is(err, errSyntax) {
		return nil
	}
	return err
}

// errSyntax stops the scan: the decoder reports the syntax error.
var errSyntax = errors.New("api: json syntax")

// shape is what checkStrict knows of a Go type: for a struct, the exact
// JSON names of its fields; for a map, slice or array, its elements. A nil
// *shape accepts any key (interfaces, json.RawMessage, strings, numbers).
type shape struct {
	fields map[string]*shape // struct: JSON name to the field's shape
	names  []string          // struct: the JSON names, for the case hint
	isMap  bool              // map with string keys: any key, elem for values
	elem   *shape            // map, slice or array
}

var shapes sync.Map // reflect.Type to *shape

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the shape of t, following the rules of encoding/json for
// field names (tag name, else the Go name; "-" skipped; fields of embedded
// structs promoted).
func shapeOf(t reflect.Type) *shape {
	if t == nil {
		return nil
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil // json.RawMessage, time.Time: their own syntax
	}
	if s, ok := seen[t]; ok {
		return s // a recursive type
	}
	switch t.Kind() {
	case reflect.Struct:
		s := &shape{fields: map[string]*shape{}}
		seen[t] = s
		addFields(s, t, seen)
		return s
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil
		}
		s := &shape{isMap: true}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		s := &shape{}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	}
	return nil
}

func addFields(s *shape, t reflect.Type, seen map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.fields[name] = buildShape(f.Type, seen)
		s.names = append(s.names, name)
	}
}

// scanner walks one JSON value of b from i.
type scanner struct {
	b     []byte
	i     int
	depth int
	path  []string // the field names from the top to the current value
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(sh *shape) error {
	s.ws()
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(sh)
	case c == '[':
		return s.array(sh)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z':
		// A number or literal: its syntax is the decoder's to check.
		for s.i < len(s.b) && (s.b[s.i] >= 'a' && s.b[s.i] <= 'z' || s.b[s.i] >= '0' && s.b[s.i] <= '9' ||
			s.b[s.i] == '-' || s.b[s.i] == '+' || s.b[s.i] == '.' || s.b[s.i] == 'E') {
			s.i++
		}
		return nil
	}
	return errSyntax
}

func (s *scanner) enter() error {
	if s.depth++; s.depth > MaxDepth {
		return anySchema("invalid_json", "the body is nested deeper than "+strconv.Itoa(MaxDepth)+" levels")
	}
	s.i++
	s.ws()
	return nil
}

func (s *scanner) array(sh *shape) error {
	if err := s.enter(); err != nil {
		return err
	}
	var elem *shape
	if sh != nil && sh.fields == nil && !sh.isMap {
		elem = sh.elem
	}
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(elem); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return errSyntax
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return errSyntax
		}
	}
}

// smallObject is the number of keys below which an object's keys are
// compared pairwise instead of through a map: requests have a few.
const smallObject = 16

func (s *scanner) object(sh *shape) error {
	if err := s.enter(); err != nil {
		return err
	}
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	var keys keySet
	for {
		key, err := s.key()
		if err != nil {
			return err
		}
		child, err := s.member(sh, key, keys.seen(key))
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errSyntax
		}
		s.i++
		if sh != nil && sh.fields != nil {
			s.path = append(s.path, string(key))
		}
		if err := s.value(child); err != nil {
			return err
		}
		if sh != nil && sh.fields != nil {
			s.path = s.path[:len(s.path)-1]
		}
		if done, err := s.endMember(); done || err != nil {
			return err
		}
	}
}

// key scans an object's key, unescaped.
func (s *scanner) key() ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, errSyntax
	}
	raw, escaped, err := s.str()
	if err != nil {
		if err != errSyntax {
			return nil, anySchema("invalid_utf8", "an object key is not valid UTF-8")
		}
		return nil, err
	}
	if !escaped {
		return raw, nil
	}
	var k string
	if json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &k) != nil {
		return nil, errSyntax
	}
	return []byte(k), nil
}

// keySet is the keys of one object, to find a key given twice.
type keySet struct {
	keys [smallObject][]byte
	n    int
	big  map[string]bool
}

// seen adds key and reports whether it was there already.
func (ks *keySet) seen(key []byte) bool {
	dup := false
	switch {
	case ks.big != nil:
		dup = ks.big[string(key)]
		ks.big[string(key)] = true
	case ks.n < smallObject:
		for _, k := range ks.keys[:ks.n] {
			if string(k) == string(key) {
				dup = true
				break
			}
		}
		ks.keys[ks.n] = key
		ks.n++
		if ks.n == smallObject {
			ks.big = make(map[string]bool, 2*smallObject)
			for _, k := range ks.keys {
				ks.big[string(k)] = true
			}
		}
	}
	return dup
}

// member returns the shape of the value of key in an object of shape sh
// (nil: not checked), refusing an unknown field and a key given twice
// (dup).
func (s *scanner) member(sh *shape, key []byte, dup bool) (*shape, error) {
	switch {
	case sh != nil && sh.fields != nil:
		f, ok := sh.fields[string(key)]
		if !ok {
			return nil, s.unknownField(sh, key)
		}
		if dup {
			return nil, anySchema("invalid_json", "field "+strconv.Quote(s.join(string(key)))+" is given twice")
		}
		return f, nil
	case dup:
		// A map's keys are the client's: never named.
		return nil, anySchema("invalid_json", "an object holds the same key twice")
	case sh != nil && sh.isMap:
		return sh.elem, nil
	}
	return nil, nil
}

// endMember scans what follows an object's member: a ',' (more follow) or
// the closing '}' (done).
func (s *scanner) endMember() (done bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errSyntax
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.ws()
		return false, nil
	case '}':
		s.i++
		s.depth--
		return true, nil
	}
	return false, errSyntax
}

// join is the dotted path of field name under the current value, as
// encoding/json names fields ("batch_input.subject").
func (s *scanner) join(name string) string {
	if len(s.path) == 0 {
		return name
	}
	return strings.Join(s.path, ".") + "." + name
}

// unknownField refuses a key that is no field of sh. A key equal to a field
// name but for case is named by the field's own spelling; another key is
// named only when it looks like a field name (a client may write data, a
// subject id, as a key).
func (s *scanner) unknownField(sh *shape, key []byte) error {
	for _, name := range sh.names {
		if strings.EqualFold(name, string(key)) {
			return badRequest("invalid_json", "field names are case-sensitive: write "+strconv.Quote(s.join(name)))
		}
	}
	if fieldNameRe.Match(key) {
		return badRequest("invalid_json", "unknown field "+strconv.Quote(s.join(string(key))))
	}
	return badRequest("invalid_json", "the body holds an unknown field")
}

// plain marks the bytes a string holds as they are: printable ASCII but the
// quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans the string at s.i, leaving s.i after its closing quote. It
// returns the bytes between the quotes and whether they hold an escape. A
// string that is not valid Unicode text (invalid UTF-8, an escaped lone
// surrogate) gives an invalid_utf8 problem naming the field.
func (s *scanner) str() ([]byte, bool, error) {
	s.i++
	start := s.i
	escaped := false
	b := s.b
	for {
		for s.i < len(b) && plain[b[s.i]] {
			s.i++
		}
		if s.i >= len(b) {
			return nil, false, errSyntax
		}
		switch c := b[s.i]; {
		case c == '"':
			s.i++
			return b[start : s.i-1], escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(b) {
				return nil, false, errSyntax
			}
			if b[s.i+1] != 'u' {
				s.i += 2 // the decoder checks the escape letter
				continue
			}
			r, ok := jsonesc.Hex4(b, s.i+2)
			if !ok {
				return nil, false, errSyntax
			}
			s.i += 6
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return nil, false, s.notText()
			case r >= 0xd800 && r <= 0xdbff:
				// A high surrogate must be followed by an escaped low one.
				lo, ok := rune(0), s.i+1 < len(b) && b[s.i] == '\\' && b[s.i+1] == 'u'
				if ok {
					lo, ok = jsonesc.Hex4(b, s.i+2)
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return nil, false, s.notText()
				}
				s.i += 6
			}
		case c < 0x20:
			return nil, false, errSyntax
		default:
			r, size := utf8.DecodeRune(b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, s.notText()
			}
			s.i += size
		}
	}
}

// notText is the error of a string that is not valid Unicode text.
func (s *scanner) notText() error {
	if len(s.path) == 0 {
		return anySchema("invalid_utf8", "the body holds a string that is not valid UTF-8 (or an escaped lone surrogate)")
	}
	return anySchema("invalid_utf8", "field "+strconv.Quote(strings.Join(s.path, "."))+" is not valid UTF-8 (or holds an escaped lone surrogate)")
}

// anySchema is a 400 problem that checkStrict finds whatever the target
// type (see problemError.anySchema).
func anySchema(code, detail string) error {
	return &problemError{status: 400, code: code, title: "The request is invalid", detail: detail, anySchema: true}
}
