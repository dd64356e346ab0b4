package keystore

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// A bucket key read from the cache while a re-key replaces the entry is
// a whole key of its generation, never the zeros setBucketKey leaves in
// the entry it replaces: a key created under those zeros would be wrapped
// for good under a key nobody has (the failure TestConcurrentCreateAndRekey
// met once in CI: "wrapped key corrupt" after the re-keys).
func TestBucketKeyCopiedUnderLock(t *testing.T) {
	tr := &Tree{ttl: time.Hour, now: time.Now, bkeys: map[int]bucketEntry{}}
	keyOf := func(gen int64) []byte { return bytes.Repeat([]byte{byte(gen%250) + 1}, 32) }
	tr.setBucketKey(0, 1, keyOf(1), nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := int64(2); ; gen++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.setBucketKey(0, gen, keyOf(gen), keyOf(gen+1))
		}
	}()
	for range 100000 {
		e, err := tr.bucketKeys(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.key, keyOf(e.gen)) {
			close(stop)
			wg.Wait()
			t.Fatalf("generation %d read with key %x", e.gen, e.key)
		}
	}
	close(stop)
	wg.Wait()
}
