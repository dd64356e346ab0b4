package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/envelope"
)

// reregisterBatchBytes bounds the ciphertext bytes of one request of
// shredd reregister, below the server's default --max-body (1.4 MB): a
// batch is sent when the next envelope would pass it, or at client.MaxBatch
// envelopes. An envelope larger than this goes alone.
const reregisterBatchBytes = 1 << 20

const reregisterUsage = `usage: shredd reregister [--context STR] [--holder H] [FILE ...]    (no FILE, or -: standard input)
  registers again the artifacts of envelopes sealed after the backup the server's database was
  restored from: decrypting them answers 409 unknown_artifact until then (docs/operations.md,
  the restore drill). Input: one text envelope (shredd:v1:...) a line; blank lines and lines
  starting with # are skipped. The server opens each envelope with the live keys of its lineage
  and --context (envelopes sealed with other contexts: run again with theirs) and trusts only
  its authenticated header; an envelope of a forgotten subject is refused (410), a tampered one
  too (422). Needs an admin token. Prints one JSON line per envelope ({"source": "FILE:LINE",
  "artifact", "status": "registered"|"known"} or {"source", "error"}) and a summary on stderr.
  Exit 0 when every envelope is registered or known, 1 when one was refused, 2 usage.`

// reregisterLine is one envelope read, with where it was read.
type reregisterLine struct {
	source     string
	ciphertext string
}

// reregisterCmd runs `shredd reregister`: the client of POST
// /v1/artifacts/reregister, in batches.
func reregisterCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fl := flag.NewFlagSet("shredd reregister", flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := addServerFlags(fl, getenv, "an admin bearer token", 10*time.Minute, "time limit of the whole run")
	aad := fl.String("context", "", "the context the envelopes were sealed with (one context per run)")
	holder := fl.String("holder", "", "the holder to record for the artifacts (an envelope names none)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, reregisterUsage)
		fl.PrintDefaults()
	}
	files, err := parseInterleaved(fl, args)
	if err != nil {
		return exitUsage
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var lines []reregisterLine
	for _, f := range files {
		got, err := readEnvelopes(f, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "shredd reregister: %v\n%s\n", err, reregisterUsage)
			return exitUsage
		}
		lines = append(lines, got...)
	}
	if len(lines) == 0 {
		fmt.Fprintf(stderr, "shredd reregister: no envelope in the input\n%s\n", reregisterUsage)
		return exitUsage
	}
	c, code := sf.connect("shredd reregister", stderr, getenv)
	if c == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *sf.timeout)
	defer cancel()
	enc := json.NewEncoder(stdout)
	var registered, known, refused int
	for start := 0; start < len(lines); {
		end, size := start, 0
		for end < len(lines) && end-start < client.MaxBatch && (end == start || size+len(lines[end].ciphertext) <= reregisterBatchBytes) {
			size += len(lines[end].ciphertext)
			end++
		}
		reqs := make([]client.ReregisterRequest, end-start)
		for i, l := range lines[start:end] {
			reqs[i] = client.ReregisterRequest{Ciphertext: l.ciphertext, Context: []byte(*aad), Holder: *holder}
		}
		res, err := c.Reregister(ctx, reqs)
		if err != nil {
			fmt.Fprintf(stderr, "shredd reregister: %v (envelopes %s to %s not sent or not answered; the call can be repeated)\n",
				err, lines[start].source, lines[len(lines)-1].source)
			return exitFailed
		}
		for i, r := range res {
			src := lines[start+i].source
			if r.Err != nil {
				refused++
				enc.Encode(map[string]any{"source": src, "error": map[string]any{"status": r.Err.Status, "code": r.Err.Code, "title": r.Err.Title, "detail": r.Err.Detail}})
				continue
			}
			if r.Status == "known" {
				known++
			} else {
				registered++
			}
			enc.Encode(map[string]any{"source": src, "artifact": r.Artifact, "kind": r.Kind, "lineage_size": r.LineageSize, "status": r.Status})
		}
		start = end
	}
	fmt.Fprintf(stderr, "shredd reregister: %d registered, %d already known, %d refused\n", registered, known, refused)
	if refused > 0 {
		return exitFailed
	}
	return exitOK
}

// readEnvelopes reads the envelopes of one input (a file, or "-" for
// stdin): one text envelope a line, blank and # lines skipped. A line that
// is not a text envelope is an error naming its place, never its content.
func readEnvelopes(name string, stdin io.Reader) ([]reregisterLine, error) {
	r := stdin
	src := "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, src = f, name
	}
	sc := bufio.NewScanner(r)
	// The largest envelope (envelope.MaxPlaintext) in base64url, and then some.
	sc.Buffer(make([]byte, 64<<10), envelope.MaxPlaintext/3*4+1<<20)
	var out []reregisterLine
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := src + ":" + strconv.Itoa(n)
		if !strings.HasPrefix(line, envelope.Prefix) {
			return nil, fmt.Errorf("%s: not a text envelope (want one %s... a line)", where, envelope.Prefix)
		}
		out = append(out, reregisterLine{source: where, ciphertext: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return out, nil
}
