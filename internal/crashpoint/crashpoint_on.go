//go:build crashpoints

package crashpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const enabled = true

var (
	setup sync.Once
	at    string
	prob  float64
	rng   *rand.Rand
	rngMu sync.Mutex
)

func load() {
	at = os.Getenv("SHREDD_TEST_CRASH_AT")
	if v := os.Getenv("SHREDD_TEST_CRASH_RANDOM"); v != "" {
		p, seed, _ := strings.Cut(v, "/")
		f, err1 := strconv.ParseFloat(p, 64)
		s, err2 := strconv.ParseUint(seed, 10, 64)
		if err1 != nil || err2 != nil || f < 0 || f > 1 {
			fmt.Fprintln(os.Stderr, "crashpoint: SHREDD_TEST_CRASH_RANDOM must be P/SEED")
			os.Exit(2)
		}
		prob, rng = f, rand.New(rand.NewPCG(s, s^0x5bd1e995))
	}
}

// Hit kills the process with SIGKILL when name is the step named by
// SHREDD_TEST_CRASH_AT, or at random with the probability of
// SHREDD_TEST_CRASH_RANDOM. It writes the step's name to stderr first, so
// that a test can tell where the process died.
func Hit(name string) {
	setup.Do(load)
	kill := name == at
	if !kill && rng != nil {
		rngMu.Lock()
		kill = rng.Float64() < prob
		rngMu.Unlock()
	}
	if !kill {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: killed at %s\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns
}
