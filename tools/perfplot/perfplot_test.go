package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlotsMatchData: every SVG of docs/perf is what its CSV gives, so a
// plot cannot drift from the numbers it shows (scripts/perf-plots.sh
// writes them again).
func TestPlotsMatchData(t *testing.T) {
	stale, err := run(filepath.Join("..", "..", "docs", "perf"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("%v differ from their CSV: run scripts/perf-plots.sh", stale)
	}
}

// TestCheckFindsDrift: the check above can fail. A plot written from its
// data passes; the same data changed afterwards, or the SVG removed, does
// not.
func TestCheckFindsDrift(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "rss.csv")
	data := "# title: RSS\n# kind: lines\n# x: s\n# y: MiB\n# ref: 256 goal\nt,before,after\n0,40,41\n15,60,\n30,80,45\n"
	if err := os.WriteFile(csv, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(dir, false); err != nil {
		t.Fatal(err)
	}
	if stale, err := run(dir, true); err != nil || len(stale) != 0 {
		t.Fatalf("fresh plot: stale %v, err %v", stale, err)
	}
	if err := os.WriteFile(csv, []byte(data+"45,90,46\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, _ := run(dir, true); !slices.Equal(stale, []string{"rss.svg"}) {
		t.Fatalf("changed data: stale %v, want [rss.svg]", stale)
	}
	os.Remove(filepath.Join(dir, "rss.svg"))
	if stale, _ := run(dir, true); !slices.Equal(stale, []string{"rss.svg"}) {
		t.Fatalf("missing plot: stale %v, want [rss.svg]", stale)
	}
}

// TestParseRefuses: a CSV the plots cannot draw is refused, not drawn wrong.
func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"# kind: pie\na,b\nx,1\n",
		"# colour: red\na,b\nx,1\n",
		"#title no colon\na,b\nx,1\n",
		"a,b\nx,one\n",
		"# kind: lines\nt,a\nzero,1\n",
		"a\nx\n",
	} {
		if _, err := parseString(in); err == nil {
			t.Errorf("parse(%q) succeeded", in)
		}
	}
}

func parseString(s string) (*chart, error) { return parse(strings.NewReader(s)) }
