package erasure_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// BenchmarkJournal measures what the transparency log adds to the two
// operations that append to it on the request path, against the same
// service without a log, in the same run (real SQLite files, local root):
//
//	go test -run '^$' -bench Journal -benchtime 2000x -count 3 ./erasure/
//
// first_encrypt: an encrypt for a subject never seen (a key is created:
// one key_created event, signed and appended in the key's transaction);
// forget: a forget of a subject with a key (one forget_committed event).
func BenchmarkJournal(b *testing.B) {
	for _, log := range []bool{false, true} {
		name := map[bool]string{false: "log=off", true: "log=on"}[log]
		newSvc := func(b *testing.B) *shreddtest.Service {
			if log {
				return newJournaled(b).svc
			}
			s, _ := newClockedService(b)
			return s
		}
		b.Run("first_encrypt/"+name, func(b *testing.B) {
			s := newSvc(b)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s-", i)}}, []byte("x"), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("forget/"+name, func(b *testing.B) {
			s := newSvc(b)
			ctx := context.Background()
			for i := range b.N {
				if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s-", i)}}, []byte("x"), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Forget(ctx, fmt.Sprint("s-", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
