package translog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// Witness cosignatures stapled to the log's checkpoints (C2SP
// tlog-witness: the log asks witnesses to cosign each new checkpoint and
// serves their cosignatures with it). The log keeps, in memory, the latest
// cosignature of each witness; every checkpoint it hands out of a tree
// that a witness cosigned carries that witness's line. After a restart the
// witnesses are asked again (package witness): a witness cosigns the tree
// it already holds once more.

// staples are the latest cosignature line of each witness, by key name.
type staples struct {
	mu   sync.Mutex
	last map[string]staple
}

type staple struct {
	size int64
	line string // "— <name> <base64>\n"
}

// AddCosignature staples a witness's cosignature line (one signed-note
// signature line, "— <name> <base64>" and a newline) to the checkpoints of
// the tree of c, which must be a tree of this log: same origin, and c.Hash
// the root of the log's tree of size c.Size. It replaces that witness's
// earlier line. The caller has verified the line against c's note text
// with the witness's key; the log does not know witness keys. A checkpoint
// of another log or tree is an error wrapping [ErrVerify]; a malformed
// line one wrapping [ErrFormat].
func (l *Log) AddCosignature(ctx context.Context, c Checkpoint, line string) error {
	name, ok := strings.CutPrefix(line, "— ")
	if !ok || !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		return fmt.Errorf("translog: add cosignature: %w: not one signature line", ErrFormat)
	}
	name, _, ok = strings.Cut(name, " ")
	if !ok || !validKeyName(name) {
		return fmt.Errorf("translog: add cosignature: %w: bad key name", ErrFormat)
	}
	if c.Origin != l.Origin() {
		return fmt.Errorf("translog: add cosignature: %w: checkpoint of log %q", ErrVerify, c.Origin)
	}
	size, err := l.Size(ctx)
	if err != nil {
		return err
	}
	if c.Size > size {
		return fmt.Errorf("translog: add cosignature: %w: tree %d beyond the log's %d", ErrVerify, c.Size, size)
	}
	h, err := tlog.TreeHash(c.Size, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return fmt.Errorf("translog: add cosignature: %w", err)
	}
	if h != c.Hash {
		return fmt.Errorf("translog: add cosignature: %w: tree %d of this log has another root", ErrVerify, c.Size)
	}
	l.staples.mu.Lock()
	defer l.staples.mu.Unlock()
	if l.staples.last == nil {
		l.staples.last = map[string]staple{}
	}
	l.staples.last[name] = staple{size: c.Size, line: line}
	return nil
}

// staple returns signed, the log's signed checkpoint of the tree of size
// n, followed by the cosignature lines stapled to that tree, sorted.
func (l *Log) staple(signed []byte, n int64) []byte {
	l.staples.mu.Lock()
	var lines []string
	for _, s := range l.staples.last {
		if s.size == n {
			lines = append(lines, s.line)
		}
	}
	l.staples.mu.Unlock()
	if len(lines) == 0 {
		return signed
	}
	slices.Sort(lines)
	var b bytes.Buffer
	b.Write(signed)
	for _, line := range lines {
		b.WriteString(line)
	}
	return b.Bytes()
}

// WitnessedSize returns the tree size with the most stapled cosignatures
// (the larger on a tie), and their number; 0, 0 when there are none.
func (l *Log) WitnessedSize() (size int64, witnesses int) {
	l.staples.mu.Lock()
	defer l.staples.mu.Unlock()
	count := map[int64]int{}
	for _, s := range l.staples.last {
		count[s.size]++
	}
	for n, k := range count {
		if k > witnesses || (k == witnesses && n > size) {
			size, witnesses = n, k
		}
	}
	return size, witnesses
}
