package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/translog"
)

// A Target is a witness the log sends its checkpoints to.
type Target struct {
	// URL is the witness's submission prefix: requests go to
	// URL + "/add-checkpoint".
	URL string
	// Key is the witness's cosignature/v1 verifier
	// (translog.NewCosignatureVerifier); cosignatures by other keys in
	// its answers are ignored.
	Key note.Verifier
}

// Sender sends the log's new checkpoints to witnesses and staples their
// cosignatures. Run it in its own goroutine: the log's writers never wait
// for it, and a witness that fails is logged and retried with a growing
// delay.
type Sender struct {
	log      *translog.Log
	targets  []*target
	client   *http.Client
	logger   *slog.Logger
	interval time.Duration
}

// target is a Target with what the sender knows of it.
type target struct {
	Target
	mu     sync.Mutex
	known  int64 // the tree size the witness holds, as far as we know (0: unknown)
	signed int64 // the size of the last tree it cosigned for us; -1 none
	next   time.Time
	delay  time.Duration
}

// maxDelay caps the delay between retries of a failing witness.
const maxDelay = time.Minute

// NewSender returns a sender of log's checkpoints to targets, looking for
// a new checkpoint every interval. logger receives the failures; nil for
// none.
func NewSender(log *translog.Log, targets []Target, interval time.Duration, logger *slog.Logger) *Sender {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Sender{log: log, logger: logger, interval: interval,
		client: &http.Client{Timeout: 15 * time.Second}}
	for _, t := range targets {
		s.targets = append(s.targets, &target{Target: t, signed: -1})
	}
	return s
}

// Run sends checkpoints until ctx ends: at once, then every interval, each
// witness getting the current checkpoint unless it already cosigned that
// tree or waits out a retry delay.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round sends the current checkpoint once to every witness due for it,
// concurrently, and returns when all have answered or failed.
func (s *Sender) Round(ctx context.Context) {
	signed, err := s.log.Checkpoint(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("witness: read the log's checkpoint", "error", err.Error())
		}
		return
	}
	c, err := translog.ParseCheckpoint(noteText(signed))
	if err != nil {
		s.logger.Error("witness: the log's checkpoint does not parse", "error", err.Error())
		return
	}
	now := time.Now()
	var wg sync.WaitGroup
	for _, t := range s.targets {
		t.mu.Lock()
		due := t.signed != c.Size && !now.Before(t.next)
		t.mu.Unlock()
		if !due {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.send(ctx, t, c, signed)
		}()
	}
	wg.Wait()
}

// noteText returns the text of a signed note, up to its empty line.
func noteText(signed []byte) []byte {
	text, _, _ := bytes.Cut(signed, []byte("\n\n"))
	return append(text[:len(text):len(text)], '\n')
}

// Errors of a submission, for the log line and the tests.
var (
	errConflict = errors.New("the witness holds another tree of this size: split view")
	errAhead    = errors.New("the witness holds a larger tree than this node's checkpoint")
	errProof    = errors.New("the witness refused the consistency proof: the log is not an extension of what it cosigned")
)

// send submits c to t, following the witness's tree size when it answers
// 409 with another, and staples the cosignature. Failures are logged and
// delay the next try.
func (s *Sender) send(ctx context.Context, t *target, c translog.Checkpoint, signed []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var line string
		line, err = s.submit(ctx, t, c, signed)
		if err == nil {
			if err = s.log.AddCosignature(ctx, c, line); err == nil {
				t.known, t.signed, t.delay, t.next = c.Size, c.Size, 0, time.Time{}
				return
			}
			break
		}
		var sz sizeError
		if !errors.As(err, &sz) {
			break
		}
		switch {
		case sz.size > c.Size:
			t.known, err = sz.size, fmt.Errorf("%w (%d > %d)", errAhead, sz.size, c.Size)
		case sz.size == t.known:
			err = errConflict
		default:
			t.known = sz.size // the witness told us its size: prove from there
			continue
		}
		break
	}
	if ctx.Err() != nil {
		return
	}
	if t.delay = min(max(2*t.delay, s.interval), maxDelay); t.delay <= 0 {
		t.delay = time.Second
	}
	t.next = time.Now().Add(t.delay)
	level := slog.LevelWarn
	if errors.Is(err, errConflict) || errors.Is(err, errProof) {
		level = slog.LevelError
	}
	if errors.Is(err, errAhead) {
		// One log, one sequence: a witness that cosigned a larger tree
		// than the log now holds saw a log this one rolled back from (a
		// database restored from an older copy) or forked from.
		s.logger.Error("the transparency log is shorter than a tree this witness already cosigned: the log was rolled back (a restored database) or forked; checkpoints handed out above its size do not verify against it. Put back the newest database (docs/operations.md, Backups and restores) and tell the log's monitors",
			"witness", t.Key.Name(), "url", t.URL, "size", c.Size, "witness_size", t.known)
	}
	s.logger.Log(ctx, level, "witness did not cosign the checkpoint; retrying later", "witness", t.Key.Name(), "url", t.URL,
		"size", c.Size, "retry_in", t.delay.String(), "error", err.Error())
}

// sizeError is a 409 answer carrying the witness's tree size.
type sizeError struct{ size int64 }

func (e sizeError) Error() string { return fmt.Sprintf("the witness holds tree size %d", e.size) }

// submit makes one add-checkpoint request of c, with a consistency proof
// from t.known, and returns the witness's cosignature line, verified.
func (s *Sender) submit(ctx context.Context, t *target, c translog.Checkpoint, signed []byte) (string, error) {
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", t.known)
	if t.known > 0 && t.known < c.Size {
		proof, err := s.log.ProveConsistency(ctx, t.known, c.Size)
		if err != nil {
			return "", err
		}
		for _, h := range proof {
			body.WriteString(h.String() + "\n")
		}
	}
	body.WriteString("\n")
	body.Write(signed)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(t.URL, "/")+"/add-checkpoint", &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxRequest))
	if err != nil {
		return "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		if resp.Header.Get("Content-Type") == SizeContentType {
			n, err := parseSize(strings.TrimSuffix(string(b), "\n"))
			if err != nil || !strings.HasSuffix(string(b), "\n") {
				return "", fmt.Errorf("409 with a malformed size %q", b)
			}
			return "", sizeError{n}
		}
		return "", errConflict
	case http.StatusUnprocessableEntity:
		return "", errProof
	default:
		return "", fmt.Errorf("witness answered %s", resp.Status)
	}
	// The answer is signature lines; keep the one of the witness's key,
	// verified against the checkpoint's text.
	text := noteText(signed)
	n, err := note.Open(append(append(text, '\n'), b...), note.VerifierList(t.Key))
	if err != nil {
		return "", fmt.Errorf("the witness's answer holds no valid cosignature by its key: %v", err)
	}
	return fmt.Sprintf("— %s %s\n", n.Sigs[0].Name, n.Sigs[0].Base64), nil
}
