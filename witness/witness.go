// Package witness implements C2SP tlog-witness (https://c2sp.org/tlog-witness)
// for shredd's transparency log, both sides of it:
//
//   - [Witness], the witness that `shredd witness` runs: it serves
//     POST /add-checkpoint, checks each checkpoint's log signature and its
//     consistency proof from the last checkpoint it cosigned of that log,
//     keeps that checkpoint durably, and answers a C2SP tlog-cosignature
//     (cosignature/v1, package translog) of the new one. It never goes
//     back: a smaller tree is refused, and a tree of the same size with
//     another root hash, or one its proof does not lead to (a split view),
//     is refused and kept as evidence.
//   - [Sender], the log's side that `shredd serve --witness` runs: it
//     sends each new checkpoint of the log to the configured witnesses
//     with a consistency proof from the tree each last cosigned, and
//     staples their cosignatures to the log's checkpoints
//     ([translog.Log.AddCosignature]). Writes never wait for it.
package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/translog"
)

// SizeContentType is the media type of a 409 answer of add-checkpoint: the
// witness's tree size, in decimal, and a newline.
const SizeContentType = "text/x.tlog.size"

// MaxRequest bounds an add-checkpoint request body: a checkpoint with its
// signatures and 63 proof hashes fit many times over.
const MaxRequest = 64 << 10

// maxProof is the most consistency proof lines a request may carry.
const maxProof = 63

// maxRefused bounds the evidence files kept in the state directory. Only
// a request signed by a witnessed log's key leaves evidence, but a log
// gone wrong must not fill the witness's disk.
const maxRefused = 1000

// The files of the state directory.
const (
	stateSuffix = ".checkpoint" // <sha256(origin) hex>.checkpoint: the last cosigned checkpoint of a log
	refusedDir  = "evidence"    // refused checkpoints that contradict the state: a log's misbehaviour
)

// Config is what a Witness is made of.
type Config struct {
	// Cosigner signs the cosignatures (translog.NewCosigner).
	Cosigner note.Signer
	// Logs are the verifier keys of the logs witnessed; a log's origin is
	// its key's name.
	Logs []note.Verifier
	// StateDir keeps the last checkpoint cosigned of each log, and the
	// evidence of refused ones. Created 0700 when missing.
	StateDir string
	// Logger receives what the witness refused; nil for none.
	Logger *slog.Logger
}

// Witness is a C2SP tlog-witness. Its handler is safe for concurrent use:
// the check of a request against the state and the write of the new state
// happen under one lock, as the spec requires.
type Witness struct {
	cosigner note.Signer
	logs     map[string]note.Verifier // by origin
	dir      string
	log      *slog.Logger

	mu    sync.Mutex
	state map[string]translog.Checkpoint // the last cosigned, by origin
}

// New returns the witness of cfg, loading the state of every log it
// witnesses from cfg.StateDir. A state file that is not a checkpoint
// signed by its log's key is an error: the witness will not start from a
// state it cannot trust.
func New(cfg Config) (*Witness, error) {
	if cfg.Cosigner == nil || len(cfg.Logs) == 0 || cfg.StateDir == "" {
		return nil, errors.New("witness: a cosigner key, at least one log key and a state directory are required")
	}
	w := &Witness{cosigner: cfg.Cosigner, logs: map[string]note.Verifier{}, dir: cfg.StateDir, log: cfg.Logger,
		state: map[string]translog.Checkpoint{}}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	for _, v := range cfg.Logs {
		if _, dup := w.logs[v.Name()]; dup {
			return nil, fmt.Errorf("witness: two keys for log %q", v.Name())
		}
		w.logs[v.Name()] = v
	}
	if err := datadir.Prepare(w.dir); err != nil {
		return nil, fmt.Errorf("witness: state: %w", err)
	}
	for origin, v := range w.logs {
		b, err := datadir.Read(w.statePath(origin), datadir.Public, MaxRequest)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("witness: state of %s: %w", origin, err)
		}
		c, err := translog.OpenCheckpoint(b, v)
		if err != nil {
			return nil, fmt.Errorf("witness: state of %s: %w", origin, err)
		}
		w.state[origin] = c
	}
	return w, nil
}

// statePath is the file of a log's state: named by a hash of the origin,
// which may hold any character but a newline.
func (w *Witness) statePath(origin string) string {
	h := sha256.Sum256([]byte(origin))
	return filepath.Join(w.dir, hex.EncodeToString(h[:])+stateSuffix)
}

// Latest returns the last checkpoint the witness cosigned of the log of
// origin, and false when it never cosigned one.
func (w *Witness) Latest(origin string) (translog.Checkpoint, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.state[origin]
	return c, ok
}

// Handler serves the witness's HTTP interface: POST /add-checkpoint.
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", w.addCheckpoint)
	return mux
}

// A request is a parsed add-checkpoint body.
type request struct {
	old    int64
	proof  tlog.TreeProof
	signed []byte // the checkpoint note, with its signatures
}

// parseRequest parses an add-checkpoint body: "old <size>", zero to 63
// base64 hashes, an empty line, then a signed checkpoint; every line ends
// in a newline.
func parseRequest(body []byte) (*request, error) {
	r := new(request)
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	v, found := strings.CutPrefix(string(line), "old ")
	if !ok || !found {
		return nil, errors.New(`no "old <size>" line`)
	}
	old, err := parseSize(v)
	if err != nil {
		return nil, fmt.Errorf("old size: %v", err)
	}
	r.old = old
	for {
		if line, rest, ok = bytes.Cut(rest, []byte("\n")); !ok {
			return nil, errors.New("no empty line before the checkpoint")
		}
		if len(line) == 0 {
			break
		}
		if len(r.proof) == maxProof {
			return nil, fmt.Errorf("more than %d proof lines", maxProof)
		}
		h, err := tlog.ParseHash(string(line))
		if err != nil || h.String() != string(line) {
			return nil, fmt.Errorf("proof line %d is not a base64 hash", len(r.proof)+1)
		}
		r.proof = append(r.proof, h)
	}
	r.signed = rest
	return r, nil
}

// parseSize parses a tree size in decimal without leading zeros.
func parseSize(s string) (int64, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal without leading zeros", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

func (w *Witness) addCheckpoint(rw http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, MaxRequest))
	if err != nil {
		http.Error(rw, "request body too large or unreadable", http.StatusBadRequest)
		return
	}
	r, err := parseRequest(body)
	if err != nil {
		http.Error(rw, "malformed request: "+err.Error(), http.StatusBadRequest)
		return
	}
	origin, _, _ := strings.Cut(string(r.signed), "\n")
	v, ok := w.logs[origin]
	if !ok {
		http.Error(rw, "unknown log", http.StatusNotFound)
		return
	}
	c, err := translog.OpenCheckpoint(r.signed, v)
	switch {
	case errors.Is(err, translog.ErrVerify):
		http.Error(rw, "no signature by the log's key verifies", http.StatusForbidden)
		return
	case err != nil:
		http.Error(rw, "malformed checkpoint", http.StatusBadRequest)
		return
	}
	if r.old > c.Size {
		http.Error(rw, "old size above the checkpoint's size", http.StatusBadRequest)
		return
	}
	text := []byte(c.String())

	// Check against the state and persist the new one atomically.
	w.mu.Lock()
	defer w.mu.Unlock()
	latest, seen := w.state[origin]
	if r.old != latest.Size {
		rw.Header().Set("Content-Type", SizeContentType)
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", latest.Size)
		return
	}
	switch {
	case r.old == c.Size:
		empty, _ := tlog.TreeHash(0, nil)
		want := latest.Hash
		if !seen {
			want = empty
		}
		if c.Hash != want {
			w.log.Error("refused a checkpoint: another root for a tree size already cosigned (split view)",
				"origin", origin, "size", c.Size)
			w.keepRefused("split-view", origin, latest, seen, body)
			http.Error(rw, "a checkpoint of this size with another root hash was cosigned: split view", http.StatusConflict)
			return
		}
		if len(r.proof) != 0 {
			http.Error(rw, "the consistency proof between equal sizes must be empty", http.StatusUnprocessableEntity)
			return
		}
	case r.old == 0:
		if len(r.proof) != 0 {
			http.Error(rw, "the consistency proof from size 0 must be empty", http.StatusUnprocessableEntity)
			return
		}
	default:
		if err := tlog.CheckTree(r.proof, c.Size, c.Hash, latest.Size, latest.Hash); err != nil {
			w.log.Error("refused a checkpoint: its consistency proof does not lead from the tree cosigned (fork or bad proof)",
				"origin", origin, "old_size", latest.Size, "size", c.Size)
			w.keepRefused("inconsistent", origin, latest, seen, body)
			http.Error(rw, "the consistency proof does not verify", http.StatusUnprocessableEntity)
			return
		}
	}
	signed, err := note.Sign(&note.Note{Text: string(text)}, w.cosigner)
	if err != nil {
		w.log.Error("cosign", "error", err.Error())
		http.Error(rw, "cannot cosign", http.StatusInternalServerError)
		return
	}
	// The state holds the checkpoint as the log signed it (its signature
	// lines by other keys dropped), so a restart can check it again.
	logSigned, err := logSignatureOnly(r.signed, v)
	if err != nil {
		http.Error(rw, "malformed checkpoint", http.StatusBadRequest)
		return
	}
	if err := datadir.Replace(w.statePath(origin), logSigned, datadir.Public); err != nil {
		w.log.Error("persist the cosigned checkpoint", "origin", origin, "error", err.Error())
		http.Error(rw, "cannot persist the state", http.StatusServiceUnavailable)
		return
	}
	w.state[origin] = c
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	rw.Write(signed[len(text)+1:]) // the signature line, after the note text and its empty line
}

// logSignatureOnly returns the note signed with its text and only the
// signature lines of v.
func logSignatureOnly(signed []byte, v note.Verifier) ([]byte, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(n.Text + "\n")
	for _, s := range n.Sigs {
		fmt.Fprintf(&b, "— %s %s\n", s.Name, s.Base64)
	}
	return b.Bytes(), nil
}

// keepRefused writes a refused request beside the state it contradicts,
// in the evidence directory (<size held>-<kind>-<16 hex of the request's
// SHA-256>.txt): both are signed by the log, so together they
// prove that the log showed two views of itself.
func (w *Witness) keepRefused(kind, origin string, latest translog.Checkpoint, seen bool, body []byte) {
	dir := filepath.Join(w.dir, refusedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.log.Error("keep evidence", "error", err.Error())
		return
	}
	// Named by the request's hash: a log retrying the same refused
	// checkpoint leaves one file.
	sum := sha256.Sum256(body)
	name := fmt.Sprintf("%d-%s-%s.txt", latest.Size, kind, hex.EncodeToString(sum[:8]))
	if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
		return
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) >= maxRefused {
		w.log.Error("evidence directory full: a refused checkpoint is not kept", "dir", dir)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "kind %s\norigin %s\nrefused %s\n", kind, origin, time.Now().UTC().Format(time.RFC3339))
	if st, err := datadir.Read(w.statePath(origin), datadir.Public, MaxRequest); err == nil && seen {
		fmt.Fprintf(&b, "\n# the checkpoint this witness cosigned last (size %d)\n", latest.Size)
		b.Write(st)
	}
	b.WriteString("\n# the add-checkpoint request refused\n")
	b.Write(body)
	if err := datadir.Create(filepath.Join(dir, name), b.Bytes(), datadir.Public); err != nil {
		w.log.Error("keep evidence", "error", err.Error())
		return
	}
	w.log.Warn("kept evidence of a refused checkpoint", "file", filepath.Join(refusedDir, name))
}
