package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{1 << 20, 400},
		{16 << 20, 400},
		{32 << 20, 200},
		{64 << 20, 100},
		{1 << 30, 100},
	} {
		if got := gcPercent(tc.live); got != tc.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestGCTuner checks that the tuner sets the runtime's GOGC while it runs,
// puts back the setting it found when it stops, and leaves GOGC alone when
// the environment sets it.
func TestGCTuner(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	ctx, cancel := context.WithCancel(context.Background())
	done := startGCTuner(ctx, func(string) string { return "" })
	// This test binary's live heap is far below the headroom.
	if got := debug.SetGCPercent(-1); got != gcMaxPercent {
		t.Errorf("GOGC while the tuner runs = %d, want %d", got, gcMaxPercent)
	}
	debug.SetGCPercent(gcMaxPercent)

	// A live heap of 48 MiB: after the next collection the tuner sets
	// GOGC for it.
	ballast := make([]byte, 48<<20)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	// The rest of the test binary's heap adds a little to the 48 MiB.
	hi, lo := gcPercent(48<<20), gcPercent(56<<20)
	got := gcMaxPercent
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.GC()
		got = debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got >= lo && got <= hi {
			break
		}
	}
	runtime.KeepAlive(ballast)
	if got < lo || got > hi {
		t.Errorf("GOGC after collections with 48 MiB live = %d, want %d to %d", got, lo, hi)
	}
	cancel()
	<-done
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after the tuner stopped = %d, want the 100 it found", got)
	}

	done = startGCTuner(context.Background(), func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	<-done
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC with GOGC set in the environment = %d, want 100 untouched", got)
	}
}
