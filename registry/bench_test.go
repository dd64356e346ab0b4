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

// BenchmarkLineageFacts measures LineageFactsOf, what a forget's
// verification reads of each subject of a group (issue 25's P4 profile:
// a third of the server's CPU at 1M subjects / 10M artifacts): groups of
// 16 subjects, each with ten artifacts (two held by a holder, one of them
// shared with the next subject) and a live lease on one of them.
//
//	go test -run '^$' -bench LineageFacts ./registry/
func BenchmarkLineageFacts(b *testing.B) {
	const subjects, perSubject, group = 4096, 10, 16
	ctx := context.Background()
	st := shreddtest.New(b, shreddtest.Options{Kinds: shreddtest.Kinds, Registry: registry.Options{LeaseTTL: time.Hour}})
	refs := subjectRefs(b, st, "facts-", subjects)
	var next uint64
	var leased []shredd.ID
	var wg sync.WaitGroup
	errs := make(chan error, subjects)
	for i, ref := range refs {
		for j := range perSubject {
			next++
			var id shredd.ID
			binary.BigEndian.PutUint64(id[:], uint64(time.Now().UnixMilli())<<16)
			binary.BigEndian.PutUint64(id[8:], next)
			r := registry.Registration{ID: id, Kind: "episodic", Sealed: j >= 2, At: time.Now(),
				Lineage: []envelope.Ref{ref}, Direct: map[envelope.SID]bool{ref.SID: true}}
			if j < 2 {
				r.Holder = "cache-1"
			}
			if j == 1 {
				other := refs[(i+1)%len(refs)]
				r.Lineage = append(r.Lineage, other)
				r.Direct[other.SID] = true
			}
			if j == 2 {
				leased = append(leased, id)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := register(ctx, st, r); err != nil {
					errs <- err
				}
			}()
		}
		if i%256 == 255 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if err := st.Registry.Settle(ctx); err != nil {
		b.Fatal(err)
	}
	for i, id := range leased {
		unlock := st.Registry.RLockSubjects([]envelope.SID{refs[i].SID})
		_, err := st.Registry.IssueLease(ctx, id, shredd.Reader{Holder: "worker"}, []envelope.Ref{refs[i]})
		unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().UnixNano()
	sids := make([]envelope.SID, group)
	issued := make([]int64, group)
	b.ResetTimer()
	for n := range b.N {
		for i := range sids {
			sids[i] = refs[(n*group*7+i*131)%len(refs)].SID
			issued[i] = now + 1
		}
		fs, err := st.Registry.LineageFactsOf(ctx, sids, issued, now)
		if err != nil {
			b.Fatal(err)
		}
		if fs[0].Total < perSubject || len(fs[0].Leases) != 1 {
			b.Fatalf("facts %+v; want at least %d artifacts and one lease", fs[0], perSubject)
		}
	}
	b.ReportMetric(float64(b.N*group)/b.Elapsed().Seconds(), "subjects/s")
}
