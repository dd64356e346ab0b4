package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The garbage collector's target for shredd serve. Go's default (GOGC=100:
// collect when the heap has grown by its live size) is tuned for heaps far
// larger than a node's, whose live heap is a few tens of MiB: under load it
// then collects many times a second, and the collector was about 15% of the
// server's CPU in the encrypt profile of docs/performance.md. gcTuner lets
// the heap grow by up to gcMaxPercent of the live heap while that growth is
// small, and by no more than gcHeadroom (or GOGC=100's growth, whichever is
// larger) once the live heap is large: a small server collects a quarter as
// often, a large one keeps the default. GOGC in the environment turns the
// tuner off and keeps the runtime's own setting.
const (
	gcMaxPercent = 400
	gcMinPercent = 100
	gcHeadroom   = 64 << 20 // bytes
	gcEvery      = time.Second
)

// gcPercent is the GOGC the tuner sets for a live heap of live bytes.
func gcPercent(live uint64) int {
	if live == 0 {
		return gcMaxPercent
	}
	p := int(uint64(gcHeadroom) * 100 / live)
	return min(max(p, gcMinPercent), gcMaxPercent)
}

// startGCTuner runs the tuner until ctx ends, unless getenv("GOGC") is set,
// then puts back the setting it found. The channel it returns is closed when
// the tuner has stopped.
func startGCTuner(ctx context.Context, getenv func(string) string) <-chan struct{} {
	done := make(chan struct{})
	if getenv("GOGC") != "" {
		close(done)
		return done
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set, prev := -1, -1
	tune := func() {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		if p := gcPercent(live); p != set {
			if old := debug.SetGCPercent(p); prev < 0 {
				prev = old
			}
			set = p
		}
	}
	tune()
	go func() {
		defer close(done)
		defer func() { debug.SetGCPercent(prev) }()
		t := time.NewTicker(gcEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				tune()
			}
		}
	}()
	return done
}
