package shredd_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLayout: the README's layout lists every Go package of the module,
// and every path it lists exists.
func TestLayout(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	_, block, ok := strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the Layout section has no code block")
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		listed[f[0]] = true
		if f[0] == "shredd" {
			continue
		}
		if st, err := os.Stat(f[0]); err != nil || !st.IsDir() {
			t.Errorf("README layout lists %s, which is not a folder of the repository", f[0])
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/shredd/shredd"
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if rel == "" {
			rel = "shredd"
		}
		if !listed[rel] {
			t.Errorf("package %s is missing from the README's layout", rel)
		}
	}
}
