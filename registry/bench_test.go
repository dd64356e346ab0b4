package registry_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// BenchmarkRegistrations measures registrations in process through
// Registry.Queue (what sealing calls once the keys and the envelope are
// made: the registry's own cost), from 512 goroutines, against a plain Go
// loop that appends the same frames with the same group fsync, in the same
// run (issue 25's baseline for P3b). Lineages of one to three live
// subjects. It reports plain-items/s, items/s (acknowledged), folded-items/s
// (once the fold caught up) and ratio (items/s ÷ plain-items/s).
//
//	go test -run '^$' -bench Registrations -benchtime 200000x ./registry/
func BenchmarkRegistrations(b *testing.B) {
	if os.Getenv(shreddtest.StoreEnv) == "postgres" {
		b.Skip("the registration WAL is SQLite's")
	}
	const par = 512
	ctx := context.Background()
	st := shreddtest.New(b, shreddtest.Options{Kinds: shreddtest.Kinds})
	refs := subjectRefs(b, st, "bench-", 1024)
	var next atomic.Uint64
	mk := func() registry.Registration {
		n := next.Add(1)
		var id shredd.ID
		binary.BigEndian.PutUint64(id[:], uint64(time.Now().UnixMilli())<<16)
		binary.BigEndian.PutUint64(id[8:], n)
		r := registry.Registration{ID: id, Kind: "episodic", Sealed: true, At: time.Now(), Direct: map[envelope.SID]bool{}}
		for j := range 1 + int(n%3) {
			ref := refs[(int(n)*7+j*131)%len(refs)]
			r.Lineage = append(r.Lineage, ref)
			r.Direct[ref.SID] = true
		}
		return r
	}
	b.SetParallelism(par / 2)
	b.ResetTimer()

	plain := plainAppend(b, filepath.Join(b.TempDir(), "plain.seg"), mk)

	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := register(ctx, st, mk()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	acked := float64(b.N) / time.Since(start).Seconds()
	if err := st.Registry.Fold(ctx); err != nil {
		b.Fatal(err)
	}
	folded := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(plain, "plain-items/s")
	b.ReportMetric(acked, "items/s")
	b.ReportMetric(folded, "folded-items/s")
	b.ReportMetric(acked/plain, "ratio")
}

// subjectRefs makes the keys of n subjects named prefix and a number, and
// returns their refs.
func subjectRefs(tb testing.TB, st *shreddtest.Stack, prefix string, n int) []envelope.Ref {
	tb.Helper()
	refs := make([]envelope.Ref, n)
	for i := range refs {
		subject := fmt.Sprint(prefix, i)
		k, err := st.Keys.KeyWithSubject(context.Background(), st.Hasher.SID(subject), subject)
		if err != nil {
			tb.Fatal(err)
		}
		refs[i] = k.Ref
	}
	return refs
}

// register registers r as sealing does once its envelope is made: the
// read side of its lineage's barrier locks held until it is written.
func register(ctx context.Context, st *shreddtest.Stack, r registry.Registration) error {
	sids := make([]envelope.SID, len(r.Lineage))
	for i, ref := range r.Lineage {
		sids[i] = ref.SID
	}
	unlock := st.Registry.RLockSubjects(sids)
	defer unlock()
	p, err := st.Registry.Queue(ctx, r)
	if err != nil {
		return err
	}
	return p.Wait()
}

// plainAppend appends b.N registrations from the same goroutines through
// a bare group writer: gather what is queued, append it as one frame,
// fdatasync, answer. It returns the registrations per second.
func plainAppend(b *testing.B, path string, mk func() registry.Registration) float64 {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	type req struct {
		r    registry.Registration
		done chan struct{}
	}
	q := make(chan req, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		key := registry.WALKey(shreddtest.Secret)
		var buf []byte
		seq := uint64(1)
		for first := range q {
			batch := []req{first}
		collect:
			for len(batch) < 512 {
				select {
				case r, ok := <-q:
					if !ok {
						break collect
					}
					batch = append(batch, r)
				default:
					break collect
				}
			}
			regs := make([]*registry.Registration, len(batch))
			for i := range batch {
				regs[i] = &batch[i].r
			}
			buf = registry.AppendFrame(buf[:0], key, seq, regs)
			seq += uint64(len(regs))
			if _, err := f.Write(buf); err != nil {
				b.Error(err)
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				b.Error(err)
			}
			for _, r := range batch {
				close(r.done)
			}
		}
	}()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := req{r: mk(), done: make(chan struct{})}
			q <- r
			<-r.done
		}
	})
	rate := float64(b.N) / time.Since(start).Seconds()
	close(q)
	wg.Wait()
	return rate
}
