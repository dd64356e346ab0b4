package main

// Regression tests for races the end-to-end tests once found: cached keys
// zeroed while in use, live keys reported shredded during an epoch, and an
// epoch failing when its WAL checkpoint met readers. They provoke the races
// with load; a run that passes proves the fix for that interleaving only, so
// they run on every test run.
//
// Both use --cache-ttl 1ns so that nearly every request misses the key
// caches; the races also exist with the default TTL, only rarer.

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/shredd/shredd/envelope"
)

// TestCacheExpiryNeverZeroesKeysInUse: keystore's DEK cache once handed out
// the cached key slice itself and zeroed it in place when the entry expired,
// while another request could still be sealing or opening with it. An
// encrypt that lost this race returned 200 with a ciphertext sealed under an
// all-zero DEK. The cache now owns its copy and hands out clones.
func TestCacheExpiryNeverZeroesKeysInUse(t *testing.T) {
	s := startServer(t, t.TempDir(), serverOpts{Args: []string{"--cache-ttl", "1ns"}})
	s.putKinds(t, "episodic")
	var mu sync.Mutex
	var recs []record
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				if w%2 == 1 { // readers keep the key in use
					mu.Lock()
					var rec record
					if len(recs) > 0 {
						rec = recs[i%len(recs)]
					}
					mu.Unlock()
					if rec.ciphertext != "" {
						_, _ = s.call(http.MethodPost, "/v1/decrypt", decryptReq(rec))
					}
					continue
				}
				pt := fmt.Sprintf("worker %d record %d", w, i)
				r, err := s.call(http.MethodPost, "/v1/encrypt", sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64(pt)})
				if err != nil || r.Status != http.StatusOK {
					t.Errorf("encrypt: %v %d %s", err, r.Status, r.Body)
					continue
				}
				var sd sealed
				r.into(t, &sd)
				mu.Lock()
				recs = append(recs, record{name: pt, ciphertext: sd.Ciphertext, plaintext: pt, artifact: sd.Artifact})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, rec := range recs {
		r := s.do(t, http.MethodPost, "/v1/decrypt", decryptReq(rec))
		if r.Status == http.StatusOK {
			continue
		}
		msg := fmt.Sprintf("a 200 encrypt gave a ciphertext that does not decrypt: %d %s", r.Status, r.Body)
		if env, err := envelope.ParseText(rec.ciphertext); err == nil && len(env.Header.Lineage) == 1 {
			zero := []envelope.SubjectKey{{Ref: env.Header.Lineage[0], Key: make([]byte, envelope.KeySize)}}
			if pt, err := envelope.Open(env, zero, nil); err == nil {
				msg += fmt.Sprintf("; it opens with an all-zero subject key: %q", pt)
			}
		}
		t.Error(msg)
	}
}

// TestEpochUnderLoad: live data must keep decrypting, and epochs
// must complete, while requests run. Two races once broke this:
//
//   - keystore.Tree.bucketKey read a bucket's wrapped key and unwrapped it
//     later; when an epoch rewrapped the bucket and trimmed the old root
//     version in between, the unwrap failed with ErrVersionDestroyed, which
//     became 410 "shredded" for a subject never forgotten (now bucketKey
//     reads the row again and retries);
//   - RunEpoch failed with 500 "database busy" when readers were active
//     during its WAL checkpoint (now the checkpoint is retried).
func TestEpochUnderLoad(t *testing.T) {
	s := startServer(t, t.TempDir(), serverOpts{Buckets: 1, Args: []string{"--cache-ttl", "1ns"}})
	s.putKinds(t, "episodic")
	var recs []record
	for i := 0; i < 8; i++ {
		recs = append(recs, s.seal(t, sealReq{Subject: fmt.Sprint("subject-", i), Kind: "episodic"}, fmt.Sprint("record ", i), ""))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := recs[(w+i)%len(recs)]
				if i%4 == 0 {
					// Fresh data, not what the worker decrypted: the
					// write unit (its decrypts are in the check unit).
					r, err := s.call(http.MethodPost, "/v1/encrypt", sealReq{Subject: fmt.Sprint("subject-", (w+i)%len(recs)), Kind: "episodic", Plaintext: b64("more"), Unit: writeUnit})
					if err != nil || r.Status != http.StatusOK {
						t.Errorf("encrypt for a live subject during epochs: %v %d %s", err, r.Status, r.Body)
					}
					continue
				}
				r, err := s.call(http.MethodPost, "/v1/decrypt", decryptReq(rec))
				if err != nil || r.Status != http.StatusOK {
					t.Errorf("decrypt of live %q during epochs: %v %d %s", rec.plaintext, err, r.Status, r.Body)
				}
			}
		}()
	}
	for i := 0; i < 30; i++ {
		s.forget(t, fmt.Sprint("victim-", i))
		if r := s.do(t, http.MethodPost, "/v1/epoch", nil); r.Status != http.StatusOK {
			t.Errorf("epoch under load: %d %s", r.Status, r.Body)
		}
	}
	close(stop)
	wg.Wait()
}
