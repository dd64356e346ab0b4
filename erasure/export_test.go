package erasure

import (
	"context"
	"testing"
	"time"

	"github.com/shredd/shredd"
)

// HoldForgets keeps the forgets that commit from now on waiting in the
// queue, as if a group were running, until release starts the group
// commit; queued says how many wait. Tests use it to commit a known set of
// forgets in one group.
func HoldForgets(s *Eraser) (queued func() int, release func()) {
	c := s.group
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	queued = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	return queued, func() { go c.drain() }
}

// HoldWork takes the work lock (re-keys and epochs) until release.
func HoldWork(t testing.TB, s *Eraser) (release func()) {
	unlock, err := s.lockWork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return unlock
}

// StartEpoch leaves an epoch running, as a crash after its start does.
func StartEpoch(t testing.TB, s *Eraser) {
	v, err := s.keys.Root().Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(context.Background(), `INSERT INTO epochs(state, started_at, from_version) VALUES ('running', ?, ?)`,
		time.Now().UnixNano(), v.Latest); err != nil {
		t.Fatal(err)
	}
}

// ResumeEpoch completes the running epoch as another caller holding the
// work lock does (the background work, another node).
func ResumeEpoch(s *Eraser) (shredd.Epoch, error) { return s.shred.RunEpoch(context.Background()) }

// OnEpochAsked calls f once a RunEpoch call has read the epoch left
// running, before it waits for the work lock.
func OnEpochAsked(s *Eraser, f func()) { s.epochAsked = f }

// OnRekeyPass sets the re-key passes' size to n (0: as built) and calls f
// with the number of forgets each pass reads.
func OnRekeyPass(s *Eraser, n int, f func(read int)) (undo func()) {
	prev := rekeyPass
	if n > 0 {
		rekeyPass = n
	}
	s.rekeyRead = f
	return func() { rekeyPass = prev; s.rekeyRead = nil }
}
