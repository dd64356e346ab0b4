package api_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/translog"
)

// get sends an authenticated GET and fails the test unless the status is
// want.
func (e *env) get(path string, want int) reply {
	e.t.Helper()
	r := e.do("GET", path, "")
	if r.status != want {
		e.t.Fatalf("GET %s: %d %s, want %d", path, r.status, r.raw, want)
	}
	return r
}

// checkpoint fetches and opens the log's current checkpoint.
func (e *env) checkpoint() (translog.Checkpoint, []byte) {
	e.t.Helper()
	r := e.get("/v1/log/checkpoint", 200)
	if r.ctype != "text/plain; charset=utf-8" || r.header.Get("Cache-Control") != "no-store" {
		e.t.Fatalf("checkpoint: Content-Type %q, Cache-Control %q", r.ctype, r.header.Get("Cache-Control"))
	}
	cp, err := translog.OpenCheckpoint(r.raw, e.logVerifier)
	if err != nil {
		e.t.Fatalf("the served checkpoint does not open under the log key: %v\n%s", err, r.raw)
	}
	return cp, r.raw
}

// entries reads entries [0, n) back from the entry bundles of the tile
// layout (n < 256: one partial bundle).
func (e *env) entries(n int64) [][]byte {
	e.t.Helper()
	r := e.get(fmt.Sprintf("/v1/log/tile/entries/000.p/%d", n), 200)
	if r.ctype != "application/octet-stream" || r.header.Get("Cache-Control") != "" {
		e.t.Fatalf("partial entry bundle: Content-Type %q, Cache-Control %q", r.ctype, r.header.Get("Cache-Control"))
	}
	var out [][]byte
	for b := r.raw; len(b) > 0; {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			e.t.Fatalf("truncated entry bundle after %d entries", len(out))
		}
		l := int(binary.BigEndian.Uint16(b))
		out = append(out, b[2:2+l])
		b = b[2+l:]
	}
	if int64(len(out)) != n {
		e.t.Fatalf("entry bundle of width %d holds %d entries", n, len(out))
	}
	return out
}

// TestLogRoutes checks every answer of the log routes with the verifying
// half of translog, as a monitor would: the key, the checkpoint under it,
// the entries from the tile layout (each a signed event), the hash tile
// against the entries, an inclusion proof of every entry at every tree
// size, and consistency between checkpoints fetched before and after more
// events.
func TestLogRoutes(t *testing.T) {
	e := newEnv(t, 0)
	if r := e.get("/v1/log/key", 200); string(r.raw) != e.logVKey+"\n" || r.ctype != "text/plain; charset=utf-8" {
		t.Fatalf("GET /v1/log/key: %q (%s), want the verifier key and a newline", r.raw, r.ctype)
	}
	empty, _ := e.checkpoint()
	if empty.Origin != testkeys.LogOrigin || empty.Size != 0 {
		t.Fatalf("the checkpoint of a new log: %+v", empty)
	}
	e.setup() // alice's key: key_created
	if r := e.do("POST", "/v1/encrypt", `{"subject":"bob@example.com","kind":"episodic","plaintext":""}`); r.status != 200 {
		t.Fatalf("encrypt: %d %v", r.status, r.body)
	}
	old, oldSigned := e.checkpoint()
	if old.Size != 2 {
		t.Fatalf("after two subject keys the tree has %d entries, want 2 key_created", old.Size)
	}
	if r := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`); r.status != 202 {
		t.Fatalf("forget: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/epoch", ""); r.status != 200 {
		t.Fatalf("epoch: %d %v", r.status, r.body)
	}
	cur, _ := e.checkpoint()
	if cur.Size != 4 {
		t.Fatalf("after a forget and an epoch the tree has %d entries, want 4", cur.Size)
	}

	// The entries: signed events, in the order of the changes.
	entries := e.entries(cur.Size)
	want := []string{attest.EventKeyCreated, attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventEpochCompleted}
	for i, data := range entries {
		ev, err := attest.OpenEvent(data, e.attPub)
		if err != nil {
			t.Fatalf("entry %d does not open under the attestation key: %v", i, err)
		}
		if ev.Event != want[i] {
			t.Errorf("entry %d is %s, want %s", i, ev.Event, want[i])
		}
		if bytes.Contains(data, []byte("alice")) || bytes.Contains(data, []byte("bob@")) {
			t.Errorf("entry %d names a subject: %s", i, data)
		}
	}
	// The level-0 hash tile holds the entries' RFC 6962 leaf hashes.
	r := e.get(fmt.Sprintf("/v1/log/tile/0/000.p/%d", cur.Size), 200)
	if len(r.raw) != int(cur.Size)*tlog.HashSize {
		t.Fatalf("hash tile of %d bytes for %d entries", len(r.raw), cur.Size)
	}
	for i, data := range entries {
		if h := tlog.RecordHash(data); !bytes.Equal(r.raw[i*tlog.HashSize:(i+1)*tlog.HashSize], h[:]) {
			t.Errorf("hash tile: leaf %d is not the hash of entry %d", i, i)
		}
	}

	// An inclusion proof of every entry, in the current tree and in every
	// tree that holds it.
	for i, data := range entries {
		for size := int64(i + 1); size <= cur.Size; size++ {
			path := fmt.Sprintf("/v1/log/proof/%d?size=%d", i, size)
			if size == cur.Size {
				path = fmt.Sprintf("/v1/log/proof/%d", i)
			}
			r := e.get(path, 200)
			cp, err := translog.CheckProof(r.raw, data, e.logVerifier)
			if err != nil {
				t.Fatalf("%s: %v\n%s", path, err, r.raw)
			}
			if cp.Size != size {
				t.Fatalf("%s: proof against a tree of %d", path, cp.Size)
			}
			if _, err := translog.CheckProof(r.raw, entries[(i+1)%len(entries)], e.logVerifier); err == nil {
				t.Fatalf("%s: the proof also proves another entry", path)
			}
		}
	}

	// Consistency: the tree after the forget extends the one before it.
	for _, c := range []struct {
		path string
		old  translog.Checkpoint
	}{
		{fmt.Sprintf("/v1/log/consistency?old=%d&new=%d", old.Size, cur.Size), old},
		{fmt.Sprintf("/v1/log/consistency?old=%d", old.Size), old},
		{"/v1/log/consistency?old=0", empty},
		{fmt.Sprintf("/v1/log/consistency?old=%d&new=%d", cur.Size, cur.Size), cur},
	} {
		r := e.get(c.path, 200)
		p, err := translog.ParseConsistencyProof(r.raw)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.path, err, r.raw)
		}
		if p.Old != c.old.Size || p.New != cur.Size {
			t.Fatalf("%s: a proof from %d to %d", c.path, p.Old, p.New)
		}
		if err := translog.CheckConsistency(c.old, cur, p.Hashes); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
	}
	// A proof from a tree size to a checkpoint of another tree fails.
	r = e.get(fmt.Sprintf("/v1/log/consistency?old=1&new=%d", cur.Size), 200)
	p, err := translog.ParseConsistencyProof(r.raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := translog.CheckConsistency(old, cur, p.Hashes); err == nil {
		t.Fatalf("a proof from tree 1 checks against the checkpoint of tree %d", old.Size)
	}
	// The checkpoint saved earlier still opens: nothing signed it anew.
	if _, err := translog.OpenCheckpoint(oldSigned, e.logVerifier); err != nil {
		t.Fatal(err)
	}
}

// TestLogRouteErrors checks the statuses and codes of bad log requests:
// 404 beyond the tree, 400 for malformed paths, indexes and sizes.
func TestLogRouteErrors(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	for i := 0; i < 2; i++ {
		if r := e.do("POST", "/v1/encrypt", `{"subject":"s`+strconv.Itoa(i)+`","kind":"episodic","plaintext":""}`); r.status != 200 {
			t.Fatalf("encrypt: %d %v", r.status, r.body)
		}
	}
	cp, _ := e.checkpoint()
	if cp.Size != 3 {
		t.Fatalf("tree of %d entries, want 3", cp.Size)
	}
	cases := []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/log/tile/entries/000.p/3", 200, ""},
		{"/v1/log/tile/0/000.p/2", 200, ""}, // a client with an older checkpoint
		{"/v1/log/tile/entries/000.p/4", 404, "not_found"},
		{"/v1/log/tile/entries/000", 404, "not_found"},
		{"/v1/log/tile/entries/001.p/1", 404, "not_found"},
		{"/v1/log/tile/0/000", 404, "not_found"},
		{"/v1/log/tile/1/000.p/1", 404, "not_found"},
		{"/v1/log/tile/0/x001/000", 404, "not_found"},
		{"/v1/log/tile/entries/0", 400, "invalid_log_request"},
		{"/v1/log/tile/entries/0000", 400, "invalid_log_request"},
		{"/v1/log/tile/entries/000.p/0", 400, "invalid_log_request"},
		{"/v1/log/tile/entries/000.p/256", 400, "invalid_log_request"},
		{"/v1/log/tile/entries/000.p/03", 400, "invalid_log_request"},
		{"/v1/log/tile/0/x000/000", 400, "invalid_log_request"},
		{"/v1/log/tile/00/000", 400, "invalid_log_request"},
		{"/v1/log/tile/x/000", 400, "invalid_log_request"},
		{"/v1/log/tile/0/001/000", 400, "invalid_log_request"},
		{"/v1/log/tile/", 400, "invalid_log_request"},
		{"/v1/log/tile/entries/000.p/3/", 400, "invalid_log_request"},
		{"/v1/log/proof/2", 200, ""},
		{"/v1/log/proof/3", 404, "not_found"},
		{"/v1/log/proof/2?size=2", 404, "not_found"},
		{"/v1/log/proof/0?size=4", 404, "not_found"},
		{"/v1/log/proof/99999999999", 404, "not_found"},
		{"/v1/log/proof/x", 400, "invalid_index"},
		{"/v1/log/proof/-1", 400, "invalid_index"},
		{"/v1/log/proof/1.0", 400, "invalid_index"},
		{"/v1/log/proof/99999999999999999999", 400, "invalid_index"},
		{"/v1/log/proof/0?size=x", 400, "invalid_size"},
		{"/v1/log/proof/0?size=-1", 400, "invalid_size"},
		{"/v1/log/consistency?old=1&new=3", 200, ""},
		{"/v1/log/consistency", 200, ""},
		{"/v1/log/consistency?old=4", 400, "invalid_size"},
		{"/v1/log/consistency?old=2&new=1", 400, "invalid_size"},
		{"/v1/log/consistency?old=x", 400, "invalid_size"},
		{"/v1/log/consistency?new=-2", 400, "invalid_size"},
		{"/v1/log/consistency?old=1&new=4", 404, "not_found"},
		{"/v1/log/consistency?new=9", 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			r := e.do("GET", c.path, "")
			if r.status != c.status || str(r, "code") != c.code {
				t.Fatalf("%d %q, want %d %q: %s", r.status, str(r, "code"), c.status, c.code, r.raw)
			}
			if r.status >= 400 && (r.ctype != "application/problem+json" || str(r, "request_id") == "") {
				t.Fatalf("error without problem details: %s %s", r.ctype, r.raw)
			}
		})
	}
	// A full tile is immutable; the route says so once the tree covers it.
	for i := 3; i <= translog.TileWidth; i++ {
		if r := e.do("POST", "/v1/encrypt", `{"subject":"s`+strconv.Itoa(i)+`","kind":"episodic","plaintext":""}`); r.status != 200 {
			t.Fatalf("encrypt: %d %v", r.status, r.body)
		}
	}
	if cp, _ := e.checkpoint(); cp.Size != translog.TileWidth+1 {
		t.Fatalf("tree of %d entries, want %d", cp.Size, translog.TileWidth+1)
	}
	for _, path := range []string{"/v1/log/tile/entries/000", "/v1/log/tile/0/000"} {
		if r := e.get(path, 200); r.header.Get("Cache-Control") != "private, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", path, r.header.Get("Cache-Control"))
		}
	}
	e.get("/v1/log/tile/1/000.p/1", 200)
	e.get("/v1/log/tile/entries/001.p/1", 200)
	e.get("/v1/log/tile/entries/001.p/2", 404)
}

// TestExport walks a forget to erasure on a test clock and checks its
// export: 409 before erasure, then an archive that bundle.Read and
// bundle.Verify accept under the server's keys, with the subject and salt
// of the forget call and with a checkpoint saved before the forget.
func TestExport(t *testing.T) {
	c := shreddtest.NewClock()
	e := newEnvWith(t, envOptions{now: c.Now})
	e.setup()
	_, saved := e.checkpoint()
	f := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`)
	if f.status != 202 {
		t.Fatalf("forget: %d %v", f.status, f.body)
	}
	id := str(f, "forget")
	salt, err := hex.DecodeString(str(f, "commitment_salt"))
	if err != nil || len(salt) == 0 {
		t.Fatalf("commitment_salt %q: %v", str(f, "commitment_salt"), err)
	}
	export := "/v1/forgets/" + id + "/export"
	for _, path := range []string{export, "/v1/forgets/" + id + "/attestation"} {
		if r := e.do("GET", path, ""); r.status != 409 || str(r, "code") != "not_erased" {
			t.Fatalf("GET %s before erasure: %d %s, want 409 not_erased", path, r.status, r.raw)
		}
	}
	if r := e.do("POST", "/v1/epoch", ""); r.status != 200 {
		t.Fatalf("epoch: %d %v", r.status, r.body)
	}
	c.Add(time.Minute) // past the key cache TTL
	if r := e.do("POST", "/v1/forgets/"+id+"/verify", ""); r.status != 200 || str(r, "state") != "erased" {
		t.Fatalf("verify: %d %v, want erased", r.status, r.body)
	}

	// The attestation is served byte for byte as logged.
	att := e.get("/v1/forgets/"+id+"/attestation", 200)
	if att.ctype != "application/json" || bytes.HasSuffix(att.raw, []byte("\n")) {
		t.Fatalf("attestation: Content-Type %q, trailing newline %v", att.ctype, bytes.HasSuffix(att.raw, []byte("\n")))
	}
	if _, err := attest.Open(att.raw, e.attPub); err != nil {
		t.Fatal(err)
	}

	open := func(path string) *bundle.Bundle {
		t.Helper()
		r := e.get(path, 200)
		if r.ctype != "application/gzip" || r.header.Get("Content-Disposition") != `attachment; filename="shredd-export-`+id+`.tar.gz"` {
			t.Fatalf("%s: Content-Type %q, Content-Disposition %q", path, r.ctype, r.header.Get("Content-Disposition"))
		}
		b, err := bundle.Read(bytes.NewReader(r.raw))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return b
	}
	b := open(export)
	if !bytes.Equal(b.Attestation, att.raw) || b.Forget != id || b.Consistency != nil {
		t.Fatalf("the export's attestation is not the served one, or it is about %s, or it has a consistency proof", b.Forget)
	}
	rep, err := bundle.Verify(b, bundle.Options{AttestationKey: e.attPub, LogKey: e.logVKey, Subject: "alice@example.com", Salt: salt})
	if err != nil {
		t.Fatalf("bundle.Verify: %v", err)
	}
	if rep.KeysFromExport || !rep.SubjectChecked || rep.Origin != testkeys.LogOrigin || !strings.HasPrefix(rep.KeyLink, "same subject commitment") {
		t.Fatalf("report %+v", rep)
	}
	events := strings.Join(rep.Entries, " ")
	for _, ev := range []string{attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventEpochCompleted, attest.EventErasureAttested} {
		if !strings.Contains(events, "-"+ev) {
			t.Errorf("the export has no %s entry: %s", ev, events)
		}
	}
	// The checkpoint saved before the forget: without since= the export
	// cannot show the log extends it; with since= it can.
	if _, err := bundle.Verify(b, bundle.Options{AttestationKey: e.attPub, LogKey: e.logVKey, Saved: saved}); err == nil {
		t.Fatalf("an export without a consistency proof verified against an older saved checkpoint")
	}
	old, err := translog.OpenCheckpoint(saved, e.logVerifier)
	if err != nil {
		t.Fatal(err)
	}
	b = open(export + "?since=" + strconv.FormatInt(old.Size, 10))
	if b.Consistency == nil {
		t.Fatal("since= gave no consistency proof")
	}
	rep, err = bundle.Verify(b, bundle.Options{AttestationKey: e.attPub, LogKey: e.logVKey, Saved: saved})
	if err != nil || rep.Consistent == "" {
		t.Fatalf("bundle.Verify with the saved checkpoint: %+v %v", rep, err)
	}
	// The wrong subject does not open the commitment.
	if _, err := bundle.Verify(b, bundle.Options{AttestationKey: e.attPub, LogKey: e.logVKey, Subject: "bob@example.com", Salt: salt}); err == nil {
		t.Fatal("the export verified for another subject")
	}

	size := e.checkpointSize()
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{export + "?since=x", 400, "invalid_size"},
		{export + "?since=-1", 400, "invalid_size"},
		{export + "?since=" + strconv.FormatInt(size+1, 10), 400, "invalid_request"},
		{export + "?since=" + strconv.FormatInt(size, 10), 200, ""},
		{"/v1/forgets/00000000000000000000000000000000/export", 404, "not_found"},
		{"/v1/forgets/xyz/export", 400, "invalid_id"},
	} {
		if r := e.do("GET", c.path, ""); r.status != c.status || str(r, "code") != c.code {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, r.status, str(r, "code"), c.status, c.code)
		}
	}
}

func (e *env) checkpointSize() int64 {
	e.t.Helper()
	cp, _ := e.checkpoint()
	return cp.Size
}

// TestNoLog checks a service without a transparency log: every log route
// answers 503 no_log, the export of a forget too, while the rest of the
// API works.
func TestNoLog(t *testing.T) {
	e := newEnvWith(t, envOptions{noLog: true})
	e.setup()
	f := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`)
	if f.status != 202 {
		t.Fatalf("forget without a log: %d %v", f.status, f.body)
	}
	for _, path := range []string{"/v1/log/checkpoint", "/v1/log/key", "/v1/log/tile/entries/000.p/1", "/v1/log/tile/bogus",
		"/v1/log/proof/0", "/v1/log/consistency?old=1"} {
		r := e.do("GET", path, "")
		if r.status != 503 || str(r, "code") != "no_log" || r.ctype != "application/problem+json" {
			t.Errorf("GET %s: %d %s, want 503 no_log", path, r.status, r.raw)
		}
	}
	if r := e.do("GET", "/v1/forgets/"+str(f, "forget")+"/export", ""); r.status != 503 || str(r, "code") != "no_log" {
		t.Errorf("export without a log: %d %s, want 503 no_log", r.status, r.raw)
	}
}
