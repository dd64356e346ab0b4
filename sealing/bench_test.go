package sealing_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/shreddtest"
)

// BenchmarkEncrypt seals 1 KiB records of 256 subjects from many
// goroutines: the registrations share group commits (real SQLite, fsync).
// `shredd bench` measures the whole service over HTTP.
func BenchmarkEncrypt(b *testing.B) {
	for _, par := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s := shreddtest.NewService(b)
			ctx := context.Background()
			pt := make([]byte, 1024)
			for i := range 256 {
				if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i)}}, pt, nil); err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			b.SetParallelism(max(1, par/2))
			b.SetBytes(1024)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i%256)}}, pt, nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
