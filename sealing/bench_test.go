package sealing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// sealedRecords is a service with a 1 KiB record sealed for each of 256
// subjects (s0 to s255), and the records' ciphertexts.
func sealedRecords(b *testing.B) (*shreddtest.Service, []string) {
	s := shreddtest.NewService(b)
	pt := make([]byte, 1024)
	recs := make([]string, 0, 256)
	for i := range 256 {
		out, err := s.Encrypt(context.Background(), shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i)}}, pt, nil)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, out.Ciphertext)
	}
	return s, recs
}

// runParallel runs op b.N times from par/2 goroutines a CPU (at least
// one), counting 1 KiB an op; i numbers the ops from 1 across the
// goroutines. An error fails the benchmark.
func runParallel(b *testing.B, par int, op func(i int64) error) {
	var n atomic.Int64
	b.SetParallelism(max(1, par/2))
	b.SetBytes(1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEncrypt seals 1 KiB records of 256 subjects from many
// goroutines: the registrations share group commits (real SQLite, fsync).
// `shredd bench` measures the whole service over HTTP.
func BenchmarkEncrypt(b *testing.B) {
	for _, par := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s, _ := sealedRecords(b)
			ctx := context.Background()
			pt := make([]byte, 1024)
			runParallel(b, par, func(i int64) error {
				_, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i%256)}}, pt, nil)
				return err
			})
		})
	}
}

// BenchmarkRegister registers artifacts with the lineage mix of
// `shredd-bench fill` from many goroutines, each call one artifact: half
// records of one subject (sealed), 30% plaintext-held embeddings of a
// recent record, 15% summaries of 2 to 4 recent records, 5% aggregates over
// 5 to 20 subjects. Registrations share group commits (real SQLite, fsync).
// It reports items/s: the registrations, not the bytes sealed.
func BenchmarkRegister(b *testing.B) {
	for _, par := range []int{64, 512} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s := shreddtest.NewService(b)
			ctx := context.Background()
			mix := newRegisterMix(b, s, 1024)
			b.SetParallelism(max(1, par/2))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := mix.one(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRates(b, s, start)
		})
	}
}

// reportRates reports the registrations acknowledged per second
// (items/s) and, after waiting for the registration WAL's fold to catch
// up, per second including that wait (folded-items/s): the rate the
// tables can sustain.
func reportRates(b *testing.B, s *shreddtest.Service, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
	if err := s.Registry.Fold(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "folded-items/s")
}

// registerMix draws registrations with the lineage mix of BenchmarkRegister.
type registerMix struct {
	s       *shreddtest.Service
	n       atomic.Int64
	mu      sync.Mutex
	records []shredd.ID // a ring of recent records
	pt      []byte
}

func newRegisterMix(b *testing.B, s *shreddtest.Service, subjects int) *registerMix {
	m := &registerMix{s: s, pt: make([]byte, 64)}
	for i := range subjects {
		out, err := s.Encrypt(context.Background(), shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i)}}, m.pt, nil)
		if err != nil {
			b.Fatal(err)
		}
		m.records = append(m.records, out.Artifact)
	}
	return m
}

func (m *registerMix) recent(i int64) shredd.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records[int(i)%len(m.records)]
}

func (m *registerMix) remember(i int64, id shredd.ID) {
	m.mu.Lock()
	m.records[int(i)%len(m.records)] = id
	m.mu.Unlock()
}

// source draws the i-th source of the mix.
func (m *registerMix) source(i int64) shredd.Source {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	subj := func() string { return fmt.Sprint("s", r.IntN(len(m.records))) }
	switch x := r.IntN(100); {
	case x < 50:
		return shredd.Source{Kind: "episodic", Subjects: []string{subj()}}
	case x < 80:
		return shredd.Source{Kind: "embedding", Holder: "ann-index", Parents: []shredd.ID{m.recent(r.Int64())}}
	case x < 95:
		ps := make([]shredd.ID, 2+r.IntN(3))
		for j := range ps {
			ps[j] = m.recent(r.Int64())
		}
		return shredd.Source{Kind: "summary", Parents: ps}
	default:
		ss := make([]string, 5+r.IntN(16))
		for j := range ss {
			ss[j] = subj()
		}
		return shredd.Source{Kind: "summary", Subjects: ss}
	}
}

// one registers the next item of the mix through the single calls:
// Register for embeddings (plaintext-held), Encrypt for the others.
func (m *registerMix) one(ctx context.Context) error {
	i := m.n.Add(1)
	src := m.source(i)
	if src.Holder != "" {
		_, err := m.s.Register(ctx, src)
		return err
	}
	out, err := m.s.Encrypt(ctx, src, m.pt, nil)
	if err == nil && src.Kind == "episodic" {
		m.remember(i, out.Artifact)
	}
	return err
}

// BenchmarkRegisterBatch registers artifacts with the lineage mix of
// BenchmarkRegister through the batch path (DataKeys: registrations with
// their data keys, what POST /v1/datakey runs), in batches of 100 or 1,000
// from 8 goroutines: the registrations share group commits (real SQLite,
// fsync). It reports items/s.
func BenchmarkRegisterBatch(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := shreddtest.NewService(b)
			ctx := context.Background()
			mix := newRegisterMix(b, s, 1024)
			var n atomic.Int64
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				batch := make([]shredd.Source, 0, size)
				flush := func() bool {
					out, errs := s.DataKeys(ctx, batch)
					for i, err := range errs {
						if err != nil {
							b.Error(err)
							return false
						}
						if batch[i].Kind == "episodic" {
							mix.remember(n.Add(1), out[i].Artifact)
						}
					}
					batch = batch[:0]
					return true
				}
				for pb.Next() {
					batch = append(batch, mix.source(n.Add(1)))
					if len(batch) == size && !flush() {
						return
					}
				}
				if len(batch) > 0 {
					flush()
				}
			})
			reportRates(b, s, start)
		})
	}
}

// BenchmarkDecrypt opens 1 KiB records of 256 subjects from many
// goroutines: the keys come from the cache, the registry is read for the
// artifact (an unregistered one stays closed), and the leases share group
// commits (real SQLite, fsync).
func BenchmarkDecrypt(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s, recs := sealedRecords(b)
			ctx := context.Background()
			runParallel(b, par, func(i int64) error {
				_, err := s.Decrypt(ctx, recs[i%256], nil)
				return err
			})
		})
	}
}

// BenchmarkEncryptReads is what the check of a writer's reads (docs/api.md
// "What a read costs a writer") costs an encrypt, against the same encrypt
// unchecked (no reader) in the same run and on the same database: a token
// with no live reads (baseline=unchecked), one holding 10,000 live reads
// of another unit of work, which the write's index ranges skip (against
// reads=10000/unchecked), and 200 of its own unit, which the write
// declares independent (each is a read link it registers).
func BenchmarkEncryptReads(b *testing.B) {
	for _, tc := range []struct {
		name  string
		reads int
		unit  string // the reads' unit
		src   shredd.Source
	}{
		{"baseline=unchecked", 0, "", shredd.Source{}},
		{"reads=0", 0, "", shredd.Source{Reader: "t1", Unit: "w"}},
		{"reads=10000/unchecked", 10000, "r", shredd.Source{}},
		{"reads=10000/other-unit", 10000, "r", shredd.Source{Reader: "t1", Unit: "w"}},
		{"reads=200/same-unit/independent", 200, "w", shredd.Source{Reader: "t1", Unit: "w", Independent: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, recs := sealedRecords(b)
			ctx := context.Background()
			for i := range tc.reads {
				if _, err := s.DecryptFor(ctx, recs[i%len(recs)], nil, shredd.Reader{Token: "t1", Unit: tc.unit}); err != nil {
					b.Fatal(err)
				}
			}
			pt := make([]byte, 1024)
			runParallel(b, 16, func(i int64) error {
				src := tc.src
				src.Kind, src.Subjects = "episodic", []string{fmt.Sprint("s", i%256)}
				_, err := s.Encrypt(ctx, src, pt, nil)
				return err
			})
		})
	}
}
