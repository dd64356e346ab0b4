package client_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsGo: every ```go block of docs/clients.md's Go section is code
// that go test runs: the body of an example (one tab less) or a function
// of an example file, verbatim. The examples run against the real binary;
// this keeps the page from drifting away from them.
func TestDocsGo(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Go\n")
	if !ok {
		t.Fatal("docs/clients.md has no ## Go section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 5 {
		t.Fatalf("%d go blocks in the Go section, want at least 5", len(blocks))
	}
	files, err := filepath.Glob("example_*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	var corpus strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		corpus.Write(b)
		corpus.WriteString("\n")
		for _, line := range strings.SplitAfter(string(b), "\n") {
			corpus.WriteString(strings.TrimPrefix(line, "\t"))
		}
		corpus.WriteString("\n")
	}
	for i, b := range blocks {
		if !strings.Contains(corpus.String(), b[1]) {
			first, _, _ := strings.Cut(b[1], "\n")
			t.Errorf("go block %d (%q) of docs/clients.md is not the code of an example in %v", i, first, files)
		}
	}
}
