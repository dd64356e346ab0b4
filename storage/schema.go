package storage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrSchemaAltered means a database's schema is not exactly the one this
// release's migrations make for its recorded version: a table, column,
// index, view, trigger, rule or function was added, changed or removed
// outside shredd. One trigger is enough to keep a destroyed key alive
// (BEFORE UPDATE ... RAISE(IGNORE) leaves a subject's wrapped key in place
// while the forget reports it destroyed), so such a database is never
// served nor restored.
var ErrSchemaAltered = errors.New("database schema altered outside shredd")

// A SchemaObject is one object of a database's schema as CompareSchema
// compares it: its type ("table", "index", "trigger", "view", "column",
// ...), its name, the table it belongs to, and its definition in a form
// that does not depend on whitespace or on where the schema lives.
type SchemaObject struct {
	Type, Name, Table, Def string
}

func (o SchemaObject) key() string { return o.Type + "\x00" + o.Name }

func (o SchemaObject) String() string {
	if o.Table != "" && o.Table != o.Name {
		return fmt.Sprintf("%s %s on %s", o.Type, o.Name, o.Table)
	}
	return o.Type + " " + o.Name
}

// CompareSchema compares a database's schema objects (have) with those a
// fresh migration to the same version made (want). It returns nil when
// they are the same set, and otherwise an error wrapping ErrSchemaAltered
// that names each object that is extra, missing or changed (names only:
// the definitions may be long, and the operator reads them with the
// engine's own tools).
func CompareSchema(have, want []SchemaObject) error {
	w := map[string]SchemaObject{}
	for _, o := range want {
		w[o.key()] = o
	}
	h := map[string]SchemaObject{}
	var diffs []string
	for _, o := range have {
		h[o.key()] = o
		switch wo, ok := w[o.key()]; {
		case !ok:
			diffs = append(diffs, "extra "+o.String())
		case wo.Def != o.Def || wo.Table != o.Table:
			diffs = append(diffs, "changed "+o.String())
		}
	}
	for _, o := range want {
		if _, ok := h[o.key()]; !ok {
			diffs = append(diffs, "missing "+o.String())
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	sort.Strings(diffs)
	return fmt.Errorf("%w: %s", ErrSchemaAltered, strings.Join(diffs, ", "))
}

// NormalizeSQL returns a schema statement's text in a form that two
// statements with the same meaning written with different whitespace or
// comments share: comments removed, "IF NOT EXISTS" removed (the
// migrations use it; a database made before migrations were recorded has
// the statement without it), every run of whitespace one space, none next
// to ( ) , ; and no trailing semicolon. Text in quotes is kept as it is.
func NormalizeSQL(s string) string {
	var b strings.Builder
	space := false
	emit := func(c byte) {
		if space && b.Len() > 0 && !strings.ContainsRune("(),;", rune(c)) {
			last := b.String()[b.Len()-1]
			if !strings.ContainsRune("(),;", rune(last)) {
				b.WriteByte(' ')
			}
		}
		space = false
		b.WriteByte(c)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			space = true
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				i = len(s)
			} else {
				i += end + 3
			}
			space = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			space = true
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer := c
			if c == '[' {
				closer = ']'
			}
			emit(c)
			for i++; i < len(s); i++ {
				b.WriteByte(s[i])
				if s[i] == closer {
					break
				}
			}
		default:
			emit(c)
		}
	}
	out := strings.TrimRight(b.String(), ";")
	return strings.Replace(out, " IF NOT EXISTS ", " ", 1)
}

// CheckSchema compares the database's schema with the one this release's
// migrations make for the database's recorded version
// (Engine.CheckSchema): an error wrapping ErrSchemaAltered names what
// differs.
func (d *DB) CheckSchema(ctx context.Context) error { return d.eng.CheckSchema(ctx) }
