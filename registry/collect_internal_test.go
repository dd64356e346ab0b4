package registry

import (
	"testing"
	"time"
)

// TestCollect: a group takes what is queued, up to its limit; one smaller
// than the writer's last group waits for more, until it is as large (or
// the wait ends); a closed queue ends the group at once.
func TestCollect(t *testing.T) {
	defer func(l time.Duration) { groupLinger = l }(groupLinger)
	q := make(chan int, 16)
	fill := func(from, to int) {
		for i := from; i < to; i++ {
			q <- i
		}
	}

	// What is queued, up to the limit, without waiting: want is met.
	groupLinger = time.Hour
	fill(1, 10)
	if g := collect(q, 0, 4, 1); len(g) != 4 || g[0] != 0 || g[3] != 3 {
		t.Fatalf("limited group: %v", g)
	}
	if g := collect(q, 0, 100, 6); len(g) != 7 {
		t.Fatalf("group of what is queued: %v", g) // 0 and 4..9: all of it, more than want
	}

	// Fewer than want: the group waits for the rest (the hour is never
	// reached: the test would time out).
	go fill(1, 5)
	if g := collect(q, 0, 100, 5); len(g) != 5 {
		t.Fatalf("group that waited: %v", g)
	}

	// The wait ends: the group is what came.
	groupLinger = time.Millisecond
	fill(1, 3)
	if g := collect(q, 0, 100, 10); len(g) != 3 {
		t.Fatalf("group after the wait: %v", g)
	}

	// A closed queue ends the group, waiting or not.
	groupLinger = time.Hour
	fill(1, 2)
	close(q)
	if g := collect(q, 0, 100, 10); len(g) != 2 {
		t.Fatalf("group of a closed queue: %v", g)
	}
}
