package main

// End-to-end tests: the real binary on 127.0.0.1:0, driven over HTTP. See
// e2e_helpers_test.go for starting and stopping it.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWalkthrough follows the README story: kinds, a record, a derivative
// and an aggregate, a plaintext-held artifact, then a forget that makes
// every artifact of the subject's lineage unreadable while other subjects
// keep working, and an epoch that shreds it.
func TestWalkthrough(t *testing.T) {
	s := startServer(t, t.TempDir(), serverOpts{})

	// Health needs no token; /v1 does.
	r, err := s.callToken(http.MethodGet, "/healthz", "-", nil)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /healthz: %v %d %s", err, r.Status, r.Body)
	}
	for _, tok := range []string{"-", "", "shredd_not-the-token", s.token + "x"} {
		r, err := s.callToken(http.MethodGet, "/v1/kinds", tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("GET /v1/kinds with token %q: %d, want 401", tok, r.Status)
		}
		if p := r.problem(t); p.Code != "unauthenticated" && p.Code != "invalid_token" {
			t.Errorf("401 with code %q", p.Code)
		}
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate")
		}
	}
	// A request that fails authentication does nothing.
	r, err = s.callToken(http.MethodPut, "/v1/kinds/sneaky", "wrong", nil)
	if err != nil || r.Status != http.StatusUnauthorized {
		t.Fatalf("PUT kind with a wrong token: %v %d", err, r.Status)
	}

	// Kinds: 201 when new, 200 when it exists.
	s.expect(t, http.StatusCreated, http.MethodPut, "/v1/kinds/episodic", map[string]string{"description": "conversation turns"})
	s.expect(t, http.StatusOK, http.MethodPut, "/v1/kinds/episodic", map[string]string{"description": "conversation turns"})
	s.expect(t, http.StatusCreated, http.MethodPut, "/v1/kinds/summary", nil)
	s.expect(t, http.StatusCreated, http.MethodPut, "/v1/kinds/embedding", nil)
	var kinds struct {
		Kinds []struct {
			Name string `json:"name"`
		} `json:"kinds"`
	}
	s.expect(t, http.StatusOK, http.MethodGet, "/v1/kinds", nil).into(t, &kinds)
	var names []string
	for _, k := range kinds.Kinds {
		names = append(names, k.Name)
	}
	if !slices.Equal(names, []string{"embedding", "episodic", "summary"}) {
		t.Fatalf("kinds %v, want embedding, episodic, summary", names)
	}

	// Unknown kind: 400 unknown_kind.
	s.expectProblem(t, http.StatusBadRequest, "unknown_kind", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: "alice", Kind: "diary", Plaintext: b64("x")})

	// alice's record: encrypt and decrypt.
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice: I live at 12 Rue de la Paix", "conversation-1")
	s.open(t, alice)
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob: my card ends in 4242", "conversation-2")
	carol := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol: allergic to penicillin", "")
	s.open(t, bob)
	s.open(t, carol)

	// Wrong context and a tampered ciphertext: 422 invalid_envelope.
	s.expectProblem(t, http.StatusUnprocessableEntity, "invalid_envelope", http.MethodPost, "/v1/decrypt",
		map[string]string{"ciphertext": alice.ciphertext, "context": b64("conversation-2")})
	s.expectProblem(t, http.StatusUnprocessableEntity, "invalid_envelope", http.MethodPost, "/v1/decrypt",
		map[string]string{"ciphertext": alice.ciphertext})
	s.expectProblem(t, http.StatusUnprocessableEntity, "invalid_envelope", http.MethodPost, "/v1/decrypt",
		map[string]string{"ciphertext": tamper(alice.ciphertext), "context": b64(alice.context)})

	// A derivative of alice's record with bob as a direct subject, and an
	// aggregate over alice, bob and carol.
	sealCounted := func(name string, req sealReq, plaintext, context string, lineage int) record {
		t.Helper()
		req.Plaintext, req.Context, req.Unit = b64(plaintext), b64(context), writeUnit
		var out sealed
		s.expect(t, http.StatusOK, http.MethodPost, "/v1/encrypt", req).into(t, &out)
		if out.LineageSize != lineage {
			t.Fatalf("%s lineage size %d, want %d", name, out.LineageSize, lineage)
		}
		rec := record{name: name, ciphertext: out.Ciphertext, context: context, plaintext: plaintext, artifact: out.Artifact}
		s.open(t, rec)
		return rec
	}
	derivative := sealCounted("derivative", sealReq{Subject: "bob", Parents: []string{alice.artifact}, Kind: "summary"},
		"bob and alice talked about Paris", "summary-1", 2) // alice, bob
	aggregate := sealCounted("aggregate", sealReq{Subjects: []string{"alice", "bob", "carol"}, Kind: "summary"},
		"three users like Paris", "aggregate", 3)
	// bob's and carol's own aggregate, without alice.
	bobCarol := s.seal(t, sealReq{Subjects: []string{"bob"}, Parents: []string{carol.artifact}, Kind: "summary"}, "bob and carol", "bc")

	// A plaintext-held artifact (an ANN vector) for alice, with its holder.
	var held artifactView
	s.expect(t, http.StatusCreated, http.MethodPost, "/v1/artifacts",
		sealReq{Subject: "alice", Parents: []string{alice.artifact}, Kind: "embedding", Holder: "vector-index-1", Unit: writeUnit}).into(t, &held)
	if held.Sealed || held.Holder != "vector-index-1" || held.LineageSize != 1 || len(held.Artifact) != 32 ||
		!slices.Equal(held.Parents, []string{alice.artifact}) {
		t.Fatalf("registered %+v", held)
	}
	s.expectProblem(t, http.StatusBadRequest, "unknown_parent", http.MethodPost, "/v1/artifacts",
		sealReq{Parents: []string{strings.Repeat("ab", 16)}, Kind: "embedding", Holder: "vector-index-1", Unit: writeUnit})

	// Forget alice: 202, committed, with the pending-erasure token.
	f := s.forget(t, "alice")
	if f.State != "committed" || len(f.Forget) != 32 || f.CommittedAt == nil || f.Barrier < 1 || f.Deadline.IsZero() || f.RequestedAt.IsZero() {
		t.Fatalf("forget: %+v", f)
	}
	if c := f.condition("key_destroyed"); c.Status != "ok" {
		t.Fatalf("forget: key_destroyed %+v", c)
	}
	if c := f.condition("epoch_rotated"); c.Status != "pending" {
		t.Fatalf("forget before any epoch: epoch_rotated %+v, want pending", c)
	}

	// Every artifact of alice's lineage is gone: record, derivative, aggregate.
	s.shredded(t, alice)
	s.shredded(t, derivative)
	s.shredded(t, aggregate)
	// Nothing new can carry alice. (Writes of the test's own data, in the
	// write unit: the checks above are no reads they derive from.)
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64("I am back"), Unit: writeUnit})
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subjects: []string{"carol", "alice"}, Kind: "summary", Plaintext: b64("sneaky aggregate"), Unit: writeUnit})
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Parents: []string{derivative.artifact}, Kind: "summary", Plaintext: b64("derivative of a derivative"), Unit: writeUnit})
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/artifacts",
		sealReq{Parents: []string{derivative.artifact}, Kind: "embedding", Holder: "vector-index-1", Unit: writeUnit})
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/artifacts",
		sealReq{Subject: "alice", Kind: "embedding", Holder: "vector-index-1", Unit: writeUnit})
	// bob and carol are untouched.
	s.open(t, bob)
	s.open(t, carol)
	s.open(t, bobCarol)
	s.seal(t, sealReq{Subject: "bob", Parents: []string{bob.artifact}, Kind: "summary"}, "bob again", "")

	// Forgetting again returns the same forget.
	if again := s.forget(t, "alice"); again.Forget != f.Forget {
		t.Fatalf("second forget of alice gave %s, want %s", again.Forget, f.Forget)
	}
	if got := s.getForget(t, f.Forget); got.Forget != f.Forget || got.Barrier != f.Barrier {
		t.Fatalf("GET forget: %+v, want %+v", got, f)
	}
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, "/v1/forgets/"+strings.Repeat("0", 32), nil)
	if fs := s.listForgets(t, ""); len(fs) != 1 || fs[0].Forget != f.Forget {
		t.Fatalf("forgets: %+v", fs)
	}

	// The background work re-keys alice's bucket; an epoch shreds the forget.
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	e := s.runEpoch(t)
	if e.Epoch < 1 || e.RootVersion < 2 || len(e.Retired) == 0 || e.FinishedAt.Before(e.StartedAt) {
		t.Fatalf("epoch: %+v", e)
	}
	shredded := s.getForget(t, f.Forget)
	checkShreddedView(t, shredded)
	if shredded.Epoch != e.Epoch {
		t.Errorf("forget shredded by epoch %d, want %d", shredded.Epoch, e.Epoch)
	}
	if fs := s.listForgets(t, "shredded"); len(fs) != 1 || fs[0].Forget != f.Forget {
		t.Fatalf("shredded forgets: %+v", fs)
	}
	if fs := s.listForgets(t, "committed"); len(fs) != 0 {
		t.Fatalf("committed forgets after the epoch: %+v", fs)
	}
	if again := s.forget(t, "alice"); again.Forget != f.Forget || again.State != "shredded" {
		t.Fatalf("forget of alice after the epoch: %+v", again)
	}

	// After the root rotation: alice still gone, the others still readable.
	s.shredded(t, alice)
	s.shredded(t, aggregate)
	s.open(t, bob)
	s.open(t, carol)
	s.open(t, bobCarol)
	s.stop()
}

// tamper flips one character of the envelope's body, near its end (in the
// AEAD tag), keeping it valid base64url.
func tamper(ct string) string {
	b := []byte(ct)
	i := len(b) - 3
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestNoRawSubjectIDOnDisk writes distinctive subject ids through the API
// and checks that neither the data directory (database, WAL, root file ...)
// nor the server's logs hold them, nor the logs any plaintext.
func TestNoRawSubjectIDOnDisk(t *testing.T) {
	subjects := []string{
		"alice.unique-marker-7731@example.com",
		"Bob.Mixed-Case-Marker-4482@Example.ORG",
		"491715550199773",  // a phone number: digits only
		"8802771934566021", // a customer number
		"zoë.unique-marker-9911@exämple.de",
		"never-seen.unique-marker-6620@example.net", // forgotten without ever being used
	}
	plaintexts := []string{
		"PLAINTEXT-MARKER-alpha-2231: the patient reported chest pain",
		"PLAINTEXT-MARKER-bravo-5871: account 0099-1234 password hunter2",
		"PLAINTEXT-MARKER-charlie-9902: aggregate of several people",
	}
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic", "summary", "embedding")
	var recs []record
	for i, subj := range subjects[:5] {
		recs = append(recs, s.seal(t, sealReq{Subject: subj, Kind: "episodic"}, plaintexts[i%2]+" #"+fmt.Sprint(i), "ctx"))
		s.expect(t, http.StatusCreated, http.MethodPost, "/v1/artifacts",
			sealReq{Subject: subj, Parents: []string{recs[i].artifact}, Kind: "embedding", Holder: "ann-index"})
	}
	agg := s.seal(t, sealReq{Subjects: subjects[:5], Kind: "summary"}, plaintexts[2], "agg")
	for _, rec := range recs {
		s.open(t, rec)
	}
	s.open(t, agg)
	// Failures log their errors: make some with subject ids in the request.
	s.expectProblem(t, http.StatusBadRequest, "unknown_kind", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: subjects[0], Kind: "nope", Plaintext: b64(plaintexts[0]), Unit: writeUnit})
	s.expectProblem(t, http.StatusBadRequest, "invalid_json", http.MethodPost, "/v1/encrypt",
		map[string]any{"subject": subjects[1], "kind": "episodic", "plaintext": b64(plaintexts[1]), "extra": subjects[2]})
	s.expectProblem(t, http.StatusBadRequest, "invalid_json", http.MethodPost, "/v1/forget",
		map[string]any{"subject": []string{subjects[3]}})

	for _, subj := range []string{subjects[0], subjects[2], subjects[5]} {
		f := s.forget(t, subj)
		s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	}
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: subjects[0], Kind: "episodic", Plaintext: b64(plaintexts[0]), Unit: writeUnit})
	s.shredded(t, recs[0])
	s.shredded(t, agg)
	s.open(t, recs[1])
	s.runEpoch(t)
	if fs := s.listForgets(t, "shredded"); len(fs) != 3 {
		t.Fatalf("%d forgets shredded, want 3", len(fs))
	}

	// needles returns the forms of a secret that must appear nowhere.
	needles := func(v string) map[string][]byte {
		return map[string][]byte{
			"raw":    []byte(v),
			"hex":    []byte(hex.EncodeToString([]byte(v))),
			"base64": []byte(base64.StdEncoding.EncodeToString([]byte(v))),
		}
	}
	check := func(where string, data []byte) {
		t.Helper()
		lower := bytes.ToLower(data)
		for _, v := range append(slices.Clone(subjects), plaintexts...) {
			for form, n := range needles(v) {
				if bytes.Contains(data, n) || bytes.Contains(lower, bytes.ToLower(n)) {
					t.Errorf("%s holds %q (%s form)", where, v, form)
				}
			}
		}
	}
	scan := func(when string) {
		t.Helper()
		var all []byte
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			all = append(all, b...)
			check(when+" "+filepath.Base(path), b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// A positive control: the holder id is stored as is, so the scan
		// does see what the database holds.
		if !bytes.Contains(all, []byte("ann-index")) {
			t.Fatalf("%s: the data dir does not hold the holder id; the scan reads the wrong files", when)
		}
	}
	scan("while running:")
	s.stop()
	scan("after stop:")
	logs := s.logs.Bytes()
	check("the server log", logs)
	if bytes.Contains(logs, []byte(s.token)) {
		t.Errorf("the server log holds the admin token")
	}
	if !bytes.Contains(logs, []byte(`"route":"/v1/forget"`)) {
		t.Fatalf("the log has no access lines; the check above saw nothing:\n%s", logs)
	}
}

// TestConcurrentForgetRace forgets alice while many clients encrypt and
// decrypt for her and for bob. Once the forget has returned, nothing of
// alice opens and nothing new is sealed for her; bob never notices.
func TestConcurrentForgetRace(t *testing.T) {
	// One bucket: the re-key that follows alice's forget rewraps bob's and
	// carol's keys while their requests run.
	s := startServer(t, t.TempDir(), serverOpts{Buckets: 1})
	s.putKinds(t, "episodic", "summary")
	aliceRec := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's first record", "c")
	bobRec := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's first record", "c")
	s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's first record", "c")

	type op struct {
		alice   bool // the lineage holds alice
		encrypt bool
		start   time.Time
		status  int
		rec     record // a sealed record, when an encrypt succeeded
		err     error
		body    string
	}
	const (
		workers = 16
		maxOps  = 2000 // per worker: a bound in case stop never comes
	)
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	defer halt() // also when the test fails early: no worker outlives it
	results := make([][]op, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			isAlice := w%2 == 0
			subject, own := "bob", bobRec
			if isAlice {
				subject, own = "alice", aliceRec
			}
			var out []op
			finalRound := false
			for i := 0; i < maxOps && !finalRound; i++ {
				select {
				case <-stop:
					// One more round that surely starts after the forget
					// returned, then quit.
					finalRound = true
				default:
				}
				// Encrypt: alternately the subject alone and an aggregate
				// (alice's aggregates include bob; bob's do not include alice).
				req := sealReq{Subject: subject, Kind: "episodic"}
				if i%2 == 1 {
					if isAlice {
						req = sealReq{Subjects: []string{"bob", "alice"}, Kind: "summary"}
					} else {
						req = sealReq{Subjects: []string{"bob", "carol"}, Kind: "summary"}
					}
				}
				// The worker's plaintexts are its own, not what it
				// decrypted: its encrypts are in the write unit, its
				// decrypts (decryptReq) in the check unit.
				pt := fmt.Sprintf("%s worker %d op %d", subject, w, i)
				req.Plaintext, req.Context, req.Unit = b64(pt), b64("ctx"), writeUnit
				o := op{alice: isAlice, encrypt: true, start: time.Now()}
				r, err := s.call(http.MethodPost, "/v1/encrypt", req)
				o.err, o.status, o.body = err, r.Status, string(r.Body)
				if err == nil && r.Status == http.StatusOK {
					var sd sealed
					if jerr := json.Unmarshal(r.Body, &sd); jerr != nil {
						o.err = jerr
					}
					o.rec = record{name: pt, ciphertext: sd.Ciphertext, context: "ctx", plaintext: pt, artifact: sd.Artifact}
				}
				out = append(out, o)
				// Decrypt what was just sealed, or the subject's first record.
				rec := own
				if o.rec.ciphertext != "" && i%3 != 0 {
					rec = o.rec
				}
				d := op{alice: isAlice, start: time.Now(), rec: rec}
				r, err = s.call(http.MethodPost, "/v1/decrypt", decryptReq(rec))
				d.err, d.status, d.body = err, r.Status, string(r.Body)
				if err == nil && r.Status == http.StatusOK {
					var od opened
					if jerr := json.Unmarshal(r.Body, &od); jerr != nil || od.Plaintext != b64(rec.plaintext) || od.Artifact != rec.artifact {
						d.err = fmt.Errorf("decrypt of %q gave %s (%v)", rec.plaintext, r.Body, jerr)
					}
				}
				out = append(out, d)
			}
			results[w] = out
		}()
	}

	// Let the load build up, forget alice in the middle of it, keep the load
	// on a little longer, then stop.
	time.Sleep(300 * time.Millisecond)
	f := s.forget(t, "alice")
	forgotAt := time.Now()
	if f.State != "committed" {
		t.Errorf("forget under load: %+v", f)
	}
	time.Sleep(700 * time.Millisecond)
	halt()

	var aliceSealed, bobSealed []record
	var nAlice, nAliceAfter, nBob int
	for w, ops := range results {
		for _, o := range ops {
			what := "decrypt"
			if o.encrypt {
				what = "encrypt"
			}
			if o.err != nil {
				t.Errorf("worker %d: %s: %v", w, what, o.err)
				continue
			}
			if !o.alice {
				nBob++
				if o.status != http.StatusOK {
					t.Errorf("worker %d: bob's %s failed: %d %s", w, what, o.status, o.body)
				} else if o.encrypt && len(bobSealed) < 200 {
					bobSealed = append(bobSealed, o.rec)
				}
				continue
			}
			nAlice++
			after := o.start.After(forgotAt)
			if after {
				nAliceAfter++
			}
			switch {
			case o.status != http.StatusOK && o.status != http.StatusGone:
				t.Errorf("worker %d: alice's %s: %d %s, want 200 or 410", w, what, o.status, o.body)
			case after && o.status != http.StatusGone:
				t.Errorf("worker %d: alice's %s started after the forget returned: %d, want 410", w, what, o.status)
			case o.status == http.StatusGone && !strings.Contains(o.body, `"shredded"`):
				t.Errorf("worker %d: alice's %s: 410 without code shredded: %s", w, what, o.body)
			}
			if o.encrypt && o.status == http.StatusOK {
				aliceSealed = append(aliceSealed, o.rec)
			}
		}
	}
	if nAliceAfter == 0 || nBob == 0 {
		t.Fatalf("the load did not overlap the forget: %d alice ops (%d after), %d bob ops", nAlice, nAliceAfter, nBob)
	}
	t.Logf("%d alice ops (%d after the forget), %d bob ops, %d alice records sealed", nAlice, nAliceAfter, nBob, len(aliceSealed))
	// Whatever was sealed for alice, before or while she was forgotten, no
	// longer opens.
	for _, rec := range append(aliceSealed, aliceRec) {
		s.shredded(t, rec)
	}
	// bob's data, sealed before and during the forget, opens under the keys
	// the re-key rewrapped.
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	for _, rec := range append(bobSealed, bobRec) {
		s.open(t, rec)
	}
	s.stop()
}
