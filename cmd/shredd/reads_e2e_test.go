package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Reads become lineage, on the real binary (docs/api.md "What a read costs
// a writer"): a holder reads alice's record, releases the lease, and then
// writes under bob, with and without declaring the read; a token whose
// policy inherits does the same; a unit of work keeps another unit's
// reads apart. Every path either puts the write in alice's lineage,
// records it as declared independent, or refuses it; the forget of alice
// is erased only over that, and says what it observed.

// readsToken creates a token with the CLI while the server runs and
// returns its secret and id.
func readsToken(t *testing.T, dir string, args ...string) (string, string) {
	t.Helper()
	r := cli(t, "", nil, nil, append([]string{"token", "create", "--data-dir", dir}, args...)...).want(t, 0)
	return strings.TrimSpace(string(r.stdout)), tokenID(t, string(r.stderr))
}

type readsLease struct {
	ID string `json:"id"`
}

type readsOpened struct {
	Lease readsLease `json:"lease"`
}

type readsSealed struct {
	Artifact    string   `json:"artifact"`
	Ciphertext  string   `json:"ciphertext"`
	LineageSize int      `json:"lineage_size"`
	Inherited   []string `json:"inherited"`
}

type readsArtifact struct {
	Reads []struct {
		Lease string `json:"lease"`
		How   string `json:"how"`
	} `json:"reads"`
}

type readsProblem struct {
	Code   string   `json:"code"`
	Leases []string `json:"leases"`
}

func TestReadsBecomeLineage(t *testing.T) {
	s := storyServer(t, "--lease-ttl", "1h") // the reads stay attributable through the test
	s.putKinds(t, "episodic", "summary", "embedding")
	alice := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "Alice prefers green tea.", "")
	bob := s.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "Bob walks to work.", "")
	idx, _ := readsToken(t, s.dataDir, "--name", "indexer", "--scopes", "encrypt,decrypt,register", "--holder", "idx-1")
	idx2, _ := readsToken(t, s.dataDir, "--name", "indexer-writer", "--scopes", "encrypt", "--holder", "idx-1")
	inh, _ := readsToken(t, s.dataDir, "--name", "inheritor", "--scopes", "encrypt,decrypt", "--holder", "inh-1", "--reads", "inherit")

	call := func(tok, method, path string, body any, want int, out any) reply {
		t.Helper()
		r, err := s.callToken(method, path, tok, body)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %v %d %s, want %d", method, path, err, r.Status, r.Body, want)
		}
		if out != nil {
			r.into(t, out)
		}
		return r
	}
	read := func(tok string, rec record, unit string) string {
		t.Helper()
		body := decryptReq(rec)
		if unit != "" {
			body["unit"] = unit
		}
		var o readsOpened
		call(tok, http.MethodPost, "/v1/decrypt", body, http.StatusOK, &o)
		return o.Lease.ID
	}
	write := func(extra map[string]any) map[string]any {
		body := map[string]any{"subject": "bob@example.com", "kind": "summary", "plaintext": b64("alice and bob: plan a trip to Lisbon")}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	refused := func(tok, path string, body any, lease string) {
		t.Helper()
		var p readsProblem
		call(tok, http.MethodPost, path, body, http.StatusConflict, &p)
		if p.Code != "undeclared_derivation" || !slices.Equal(p.Leases, []string{lease}) {
			t.Fatalf("%s: %+v, want undeclared_derivation naming lease %s", path, p, lease)
		}
	}

	// The indexer reads alice's record and drops the plaintext (release):
	// the read stays its own.
	lease := read(idx, alice, "")
	call(idx, http.MethodPost, "/v1/leases/"+lease+"/release", nil, http.StatusOK, nil)
	refused(idx, "/v1/encrypt", write(nil), lease)
	refused(idx, "/v1/datakey", map[string]any{"subject": "bob@example.com", "kind": "summary"}, lease)
	refused(idx, "/v1/artifacts", map[string]any{"subject": "bob@example.com", "kind": "embedding", "holder": "idx-1"}, lease)
	// Another token bound to the same holder is the same reader.
	refused(idx2, "/v1/encrypt", write(nil), lease)

	// Declared: named (alice's lineage), or independent (not).
	var named, indep readsSealed
	call(idx, http.MethodPost, "/v1/encrypt", write(map[string]any{"leases": []string{lease}}), http.StatusOK, &named)
	call(idx, http.MethodPost, "/v1/encrypt", write(map[string]any{"independent_of": []string{lease}, "plaintext": b64("Bob takes the bus.")}), http.StatusOK, &indep)
	if named.LineageSize != 2 || indep.LineageSize != 1 {
		t.Fatalf("lineage sizes: named %d, independent %d", named.LineageSize, indep.LineageSize)
	}
	var a readsArtifact
	call(idx, http.MethodGet, "/v1/artifacts/"+indep.Artifact, nil, http.StatusOK, &a)
	if len(a.Reads) != 1 || a.Reads[0].Lease != lease || a.Reads[0].How != "independent" {
		t.Fatalf("the independent write's record: %+v", a.Reads)
	}

	// The inheriting token's undeclared write gets the read's lineage.
	lease2 := read(inh, alice, "")
	var inherited readsSealed
	call(inh, http.MethodPost, "/v1/encrypt", write(nil), http.StatusOK, &inherited)
	if inherited.LineageSize != 2 || !slices.Equal(inherited.Inherited, []string{lease2}) {
		t.Fatalf("inherit: %+v", inherited)
	}
	call(inh, http.MethodPost, "/v1/leases/"+lease2+"/release", nil, http.StatusOK, nil)

	// Units: a read in unit u1 is the concern of u1 and of writes without a
	// unit, not of unit u2, whose write the forget reports as separate.
	lease3 := read(s.token, alice, "u1")
	var separate readsSealed
	call(s.token, http.MethodPost, "/v1/encrypt", write(map[string]any{"unit": "u2", "subject": "carol@example.com"}), http.StatusOK, &separate)
	refused(s.token, "/v1/encrypt", write(map[string]any{"unit": "u1", "subject": "carol@example.com"}), lease3)
	refused(s.token, "/v1/encrypt", write(map[string]any{"subject": "carol@example.com"}), lease3)
	call(s.token, http.MethodPost, "/v1/leases/"+lease3+"/release", nil, http.StatusOK, nil)

	// The dry run says what was observed of alice's reads.
	var pv struct {
		Reads struct {
			Leases, Named, Inherited, Independent, Refused, Separate int
			IndependentArtifacts                                     []string `json:"independent_artifacts"`
			SeparateArtifacts                                        []string `json:"separate_artifacts"`
		} `json:"reads"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/forget", map[string]any{"subject": "alice@example.com", "dry_run": true}).into(t, &pv)
	if r := pv.Reads; r.Leases != 3 || r.Named != 1 || r.Inherited != 1 || r.Independent != 1 || r.Refused != 2 || r.Separate != 1 ||
		!slices.Equal(r.IndependentArtifacts, []string{indep.Artifact}) || !slices.Equal(r.SeparateArtifacts, []string{separate.Artifact}) {
		t.Fatalf("dry run reads: %+v", pv.Reads)
	}

	f := s.forget(t, "alice@example.com")
	s.runEpoch(t)
	f = s.waitForget(t, f.Forget, "erased", func(v forgetView) bool { return v.State == "erased" })
	for _, rec := range []readsSealed{named, inherited} {
		s.shredded(t, record{name: "a derivative of alice's record", ciphertext: rec.Ciphertext, artifact: rec.Artifact})
	}
	s.open(t, record{name: "the independent write", ciphertext: indep.Ciphertext, plaintext: "Bob takes the bus.", artifact: indep.Artifact})
	s.open(t, bob)
	closure := conditionIn(f.Verification, "closure_intact").Reason
	if !strings.Contains(closure, "3 leases issued before the barrier") || !strings.Contains(closure, "1 were named and 1 inherited") ||
		!strings.Contains(closure, "1 declared independent, 2 left undeclared by refused writes") || !strings.Contains(closure, "1 other artifacts were written by the same readers") {
		t.Fatalf("closure_intact says %q", closure)
	}
	att := decodeDSSE(t, s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f.Forget+"/attestation", nil).Body)
	if !strings.Contains(att, `"unobserved_reads"`) || !strings.Contains(att, `"independent_writes"`) || !strings.Contains(att, indep.Artifact) ||
		!strings.Contains(att, `"separate_writes"`) || !strings.Contains(att, separate.Artifact) || !strings.Contains(att, `"reads_attributable"`) {
		t.Fatalf("the attestation does not state the reads' residuals:\n%s", att)
	}
}

// TestReadsSurviveRestart: a read stays its reader's across a restart of
// the server (which keeps the live leases of its token in memory, loaded
// from the database at start).
func TestReadsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{Args: []string{"--lease-ttl", "1h"}})
	s.putKinds(t, "episodic", "summary")
	alice := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "Alice prefers green tea.", "")
	var o readsOpened
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/decrypt", map[string]string{"ciphertext": alice.ciphertext, "context": b64(alice.context)}).into(t, &o)
	s.stop()
	s = startServer(t, dir, serverOpts{Args: []string{"--lease-ttl", "1h"}})
	var p readsProblem
	body := map[string]any{"subject": "bob@example.com", "kind": "summary", "plaintext": b64("a summary")}
	s.expect(t, http.StatusConflict, http.MethodPost, "/v1/encrypt", body).into(t, &p)
	if p.Code != "undeclared_derivation" || !slices.Equal(p.Leases, []string{o.Lease.ID}) {
		t.Fatalf("after a restart: %+v, want undeclared_derivation naming %s", p, o.Lease.ID)
	}
	body["leases"] = []string{o.Lease.ID}
	var named readsSealed
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/encrypt", body).into(t, &named)
	if named.LineageSize != 2 {
		t.Fatalf("the derivative named after a restart has lineage %d", named.LineageSize)
	}
}
