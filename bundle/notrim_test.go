package bundle_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The evidence path of every reader, the files the spec's byte rules
// live in (docs/transparency.md §10a, "No reader trims"): no call to the
// language's trim, strip or whitespace split may appear in them, since
// each language's idea of a space differs (Go's strings.TrimSpace strips
// U+0085, JavaScript's trim() strips U+FEFF, Python's strip() strips
// U+001C to U+001F). The rules name their bytes instead.
var evidencePath = []struct {
	lang  string
	files []string
}{
	{"go", []string{"bundle/*.go", "attest/*.go", "translog/format.go", "translog/verify.go", "translog/staple.go",
		"cmd/shredd/verify.go", "cmd/shredd/export.go", "api/client/verify/*.go", "testkit/evidence/check.go"}},
	{"js", []string{"ui/static/*.js", "clients/typescript/src/evidence.ts", "clients/typescript/src/verify.ts"}},
	{"py", []string{"clients/python/shredd/verify.py"}},
}

// banned are the calls, by language. Go's TrimSuffix, TrimPrefix and
// CutPrefix name their bytes exactly and are allowed; so is Python's
// base64.b64decode with validate=True (it refuses bytes outside the
// alphabet instead of skipping them), and JavaScript's atob is not (it
// skips spaces).
var banned = map[string]*regexp.Regexp{
	"go": regexp.MustCompile(`\b(strings|bytes)\.(TrimSpace|Trim|TrimLeft|TrimRight|TrimFunc|TrimLeftFunc|TrimRightFunc|Fields|FieldsFunc)\(|unicode\.IsSpace`),
	"js": regexp.MustCompile(`\.(trim|trimStart|trimEnd|trimLeft|trimRight)\(|\\s|\batob\(`),
	"py": regexp.MustCompile(`\.(strip|lstrip|rstrip)\(|\.split\(\s*\)|\.isspace\(|\bfromhex\(|\bb64decode\(`),
}

// TestNoReaderTrims greps the evidence path of every reader for the
// banned calls (it fails on the samples below first, so it can fail).
func TestNoReaderTrims(t *testing.T) {
	for lang, sample := range map[string]string{
		"go": `s := strings.TrimSpace(x)`, "js": `const k = s.trim();`, "py": `salt = bytes.fromhex(s.strip())`,
	} {
		if !banned[lang].MatchString(sample) {
			t.Fatalf("the %s pattern misses %q", lang, sample)
		}
	}
	found := 0
	for _, p := range evidencePath {
		for _, glob := range p.files {
			paths, err := filepath.Glob(filepath.Join("..", glob))
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range paths {
				if strings.HasSuffix(path, "_test.go") {
					continue
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				found++
				for i, line := range strings.Split(string(data), "\n") {
					code := stripComment(p.lang, line)
					if p.lang == "py" && strings.Contains(code, "validate=True") {
						code = strings.ReplaceAll(code, "b64decode(", "b64decode_validated(")
					}
					if banned[p.lang].MatchString(code) {
						t.Errorf("%s:%d: %s", path, i+1, strings.TrimSpace(line))
					}
				}
			}
		}
	}
	if found < 15 {
		t.Fatalf("%d files of the evidence path found, want at least 15", found)
	}
}

// stripComment drops a line's comment, roughly: the banned names may be
// named in prose.
func stripComment(lang, line string) string {
	mark := "//"
	if lang == "py" {
		mark = "#"
	}
	t := line
	for len(t) > 0 && (t[0] == ' ' || t[0] == '\t') {
		t = t[1:]
	}
	if strings.HasPrefix(t, mark) || strings.HasPrefix(t, "*") || strings.HasPrefix(t, "/*") {
		return ""
	}
	if i := strings.Index(line, " "+mark+" "); i >= 0 {
		return line[:i]
	}
	return line
}
