package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The garbage collector's target for shredd serve. Go's default (GOGC=100:
// collect when the heap has grown by its live size) is tuned for heaps far
// larger than a node's, whose live heap is a few tens of MiB: under load it
// then collects many times a second, and the collector was about 15% of the
// server's CPU in the encrypt profile of docs/performance-archive.md. gcTuner lets
// the heap grow by up to gcMaxPercent of the live heap while that growth is
// at most gcHeadroom, and by never less than the live heap (Go's default,
// from gcHeadroom of live heap on): a small server collects a quarter as
// often, a large one as Go would. It sets the target again after every
// collection, from the live heap that collection found, so that a live
// heap that grows fast (large raw bodies) never runs on the target of a
// small one. GOGC in the environment turns the tuner off and keeps the
// runtime's own setting.
const (
	gcMaxPercent = 400
	gcMinPercent = 100
	gcHeadroom   = 64 << 20 // bytes
)

// gcPercent is the GOGC the tuner sets for a live heap of live bytes.
func gcPercent(live uint64) int {
	if live == 0 {
		return gcMaxPercent
	}
	p := int(uint64(gcHeadroom) * 100 / live)
	return min(max(p, gcMinPercent), gcMaxPercent)
}

// gcTuner sets GOGC from the live heap after each collection, until stop.
type gcTuner struct {
	mu      sync.Mutex
	stopped bool
	set     int // the GOGC it set last (-1: none yet)
	prev    int // the GOGC it found
	sample  []metrics.Sample
}

// gcSentinel is an object made unreachable at once: its cleanup runs after
// the collection that found it, and arms the next one.
type gcSentinel struct{ _ *gcTuner }

// startGCTuner runs the tuner until ctx ends, unless getenv("GOGC") is set,
// then puts back the setting it found. The channel it returns is closed when
// the tuner has stopped.
func startGCTuner(ctx context.Context, getenv func(string) string) <-chan struct{} {
	done := make(chan struct{})
	if getenv("GOGC") != "" {
		close(done)
		return done
	}
	t := &gcTuner{set: -1, prev: -1, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	go func() {
		defer close(done)
		<-ctx.Done()
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		if t.prev >= 0 {
			debug.SetGCPercent(t.prev)
		}
	}()
	return done
}

// tune sets GOGC for the live heap the last collection found, and arms
// itself for the next collection.
func (t *gcTuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	if p := gcPercent(live); p != t.set {
		if old := debug.SetGCPercent(p); t.prev < 0 {
			t.prev = old
		}
		t.set = p
	}
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) { t.tune() }, t)
}
