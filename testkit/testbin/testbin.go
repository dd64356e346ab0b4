// Package testbin builds the module's commands for end-to-end tests: each
// once per test binary, into one temporary directory, with -race when the
// test binary was built with it (so the race detector watches the server
// too).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Race reports whether this test binary was built with -race.
const Race = raceEnabled

var (
	mu    sync.Mutex
	dir   string
	built = map[string]*build{}
)

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds the command pkg (an import path, such as
// "github.com/shredd/shredd/cmd/shredd") with the build tags, once per
// test binary and set of tags, and returns the executable's path.
func Build(pkg string, tags ...string) (string, error) {
	key := pkg + " " + strings.Join(tags, ",")
	mu.Lock()
	if dir == "" {
		d, err := os.MkdirTemp("", "shredd-testbin-")
		if err != nil {
			mu.Unlock()
			return "", fmt.Errorf("testbin: %w", err)
		}
		dir = d
	}
	b := built[key]
	if b == nil {
		b = &build{path: filepath.Join(dir, fmt.Sprintf("%s-%d", path.Base(pkg), len(built)))}
		built[key] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("testbin: the go command is needed to build %s: %w", pkg, err)
			return
		}
		args := []string{"build"}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		if Race {
			args = append(args, "-race")
		}
		args = append(args, "-o", b.path, pkg)
		if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	})
	return b.path, b.err
}

// Cleanup removes the binaries built so far; TestMain calls it after the
// tests.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", map[string]*build{}
	}
}
