package ui_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/shredd/shredd/ui"
)

// evidenceSource is the one JavaScript reader of evidence, from which
// static/verify.js is generated (clients/typescript/scripts/page.mjs).
const evidenceSource = "clients/typescript/src/evidence.ts"

// TestVerifyJSIsGeneratedFromTheSource: the page's verify.js names its
// source and that source's SHA-256 in its header, and the hash is the
// current source file's, so an edit of the source that was not followed
// by npm run build:page fails here. (The TypeScript client's npm test
// regenerates the file and compares every byte, which catches an edit of
// verify.js itself.)
func TestVerifyJSIsGeneratedFromTheSource(t *testing.T) {
	js, err := fs.ReadFile(ui.Files(), "verify.js")
	if err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile(`\A// GENERATED from (\S+) by clients/typescript/scripts/page\.mjs \(npm run build:page\): do not edit\.\n// source sha256 ([0-9a-f]{64})\n`).FindSubmatch(js)
	if head == nil {
		t.Fatal("verify.js does not start with the header of the generator (its source and the source's SHA-256)")
	}
	if string(head[1]) != evidenceSource {
		t.Fatalf("verify.js is generated from %s, want %s", head[1], evidenceSource)
	}
	src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(evidenceSource)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if got := string(head[2]); got != hex.EncodeToString(sum[:]) {
		t.Errorf("verify.js was generated from a source of SHA-256 %s, but %s is %x now: run npm run build:page in clients/typescript and commit ui/static/verify.js", got, evidenceSource, sum)
	}
	// The one reader: the page loads no second copy of any of it.
	page, err := fs.ReadFile(ui.Files(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	scripts := regexp.MustCompile(`<script src="([^"]+)"></script>`).FindAllSubmatch(page, -1)
	var names [][]byte
	for _, s := range scripts {
		names = append(names, s[1])
	}
	if want := [][]byte{[]byte("verify.js"), []byte("app.js")}; len(names) != len(want) || !bytes.Equal(names[0], want[0]) || !bytes.Equal(names[1], want[1]) {
		t.Errorf("index.html loads %q, want verify.js then app.js", names)
	}
}

// languageTrims are the calls and patterns a reader of evidence must not
// use (docs/transparency.md §10a): each language's idea of a space differs
// from the spec's lists, and atob skips spaces.
var languageTrims = regexp.MustCompile(`\.trim\(|\.trimStart\(|\.trimEnd\(|\.trimLeft\(|\.trimRight\(|\\s|\\S|\batob\(|\bbtoa\(|split\(\s*(/\s|' '|" ")`)

// TestEvidenceSourceTrimsNothing: the one JavaScript reader of evidence,
// and the client's attestation check over it, hold no language trim,
// whitespace pattern or whitespace split. The same check finds them in a
// line that has them, so it can fail.
func TestEvidenceSourceTrimsNothing(t *testing.T) {
	for _, bad := range []string{"s.trim()", "x.trimEnd()", `/^\s*-----BEGIN/`, `/(\S+)/`, "atob(s)", "s.split(/\\s+/)", "s.split(' ')"} {
		if !languageTrims.MatchString(bad) {
			t.Fatalf("the check misses %q", bad)
		}
	}
	for _, f := range []string{evidenceSource, "clients/typescript/src/verify.ts"} {
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if m := languageTrims.Find(line); m != nil {
				t.Errorf("%s:%d: %s", f, i+1, m)
			}
		}
	}
}
