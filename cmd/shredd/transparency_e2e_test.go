package main

// End-to-end tests of the transparency log and the regulator export
// (issue 6, docs/transparency.md) with the real binary: a story with two
// subjects, a derivative and a plaintext-held artifact acked by its holder;
// the log read back from its tiles alone and audited against the signed
// checkpoint; `shredd export` checked by `shredd verify`, and every way of
// tampering with an export (each file in turn, proofs, entries, a forked
// log, checkpoints and keys) caught by it; the standard-tools recipe of the
// export's README.txt run with openssl, jq, xxd and python3.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/translog"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// The subjects and data of the export story.
const (
	txAlice    = "alice@example.com"
	txBob      = "bob@example.com"
	txDave     = "dave@example.com" // only on the fork
	txHolder   = "ann-index"
	txAliceRec = "Alice: allergic to penicillin, lives at 12 Elm St."
	txBobRec   = "Bob: takes his coffee black."
	txSummary  = "Alice and Bob met at the clinic on Tuesday."
	txVector   = "[0.12,-0.80,0.33,0.57]"
	txContext  = "tenant-7/thread-42"
)

// exportWorld is what the export story made: files on disk (keys, saved
// checkpoints, exports) and what was read back from the original server.
type exportWorld struct {
	ok  bool
	dir string

	pub, vkey string // the original server's attestation.pub and log.vkey (copies)

	alice, bob           forgetView // the original's forgets (with their salts)
	aliceErased          forgetView // alice's forget once erased
	aliceKeyCreated      int64      // the log index of alice's key_created entry
	saved                string     // checkpoint saved before the forget: the fork point
	savedSize            int64
	aliceExport          string // alice's export, since=savedSize
	bobExport            string // bob's export, at the same tree size as alice's
	aliceAttestation     []byte // GET /v1/forgets/{id}/attestation of alice's forget
	bobAttestation       []byte
	origAfterFork        string // a checkpoint of the original after the fork point
	forkAlice            forgetView
	forkExport           string // the fork's export of its forget of alice, since=size of origAfterFork
	forkExportSinceSaved string // the same, since=savedSize (the fork point)
	forkCheckpoint       string // a checkpoint of the fork, after its forget
	aliceExportSinceFork string // the original's export of alice's forget, since=size of forkCheckpoint
	latest               string // the original's latest checkpoint, newer than aliceExport

	// The log of the original as read back from /v1/log/checkpoint and the
	// tiles only, each entry opened under the attestation key.
	logCheckpoint []byte
	logEntries    [][]byte
	logEvents     []*attest.Event
	tilesFetched  []string
	forbidden     map[string]string // what no log entry may hold, by name
}

var (
	worldOnce sync.Once
	world     *exportWorld
)

// theExportWorld runs the export story once per test binary (in the first
// test that needs it, whose t its assertions fail) and returns what it made.
func theExportWorld(t *testing.T) *exportWorld {
	t.Helper()
	worldOnce.Do(func() {
		dir, err := os.MkdirTemp(scratchDir, "export-world-")
		if err != nil {
			t.Fatal(err)
		}
		world = &exportWorld{dir: dir}
		runExportStory(t, world)
		world.ok = true
	})
	if world == nil || !world.ok {
		t.Fatal("the export story failed (see the first test that ran it)")
	}
	return world
}

// runExportStory is the story every test of this file checks:
//
//  1. On the original server: kinds; alice's and bob's records; a summary
//     derived from alice's record that also carries bob; an embedding of
//     alice's record held in plaintext by a registered holder (ann-index).
//  2. `shredd checkpoint` saves a checkpoint; the data directory is copied
//     (the fork point: the copy, run as a second server, has the same keys).
//  3. The original forgets alice and bob, the holder acks alice's
//     embedding with an Ed25519 signature, an epoch, both erased;
//     `shredd export --since <saved size>` of both, at one tree size.
//  4. The fork makes another history: new subjects, its own forget of
//     alice, ack, epoch, erasure; its export against a checkpoint of the
//     original, and the original's against a checkpoint of the fork.
//  5. The original's whole log is read back from its tiles.
func runExportStory(t *testing.T, w *exportWorld) {
	origDir := filepath.Join(w.dir, "original")
	// A cache TTL of 1ns: the read path converges at once (see storyServer).
	s := startServer(t, origDir, serverOpts{Args: []string{"--cache-ttl", "1ns", "--lease-ttl", "3s"}})
	w.pub = copyFile(t, filepath.Join(origDir, node.AttestationPubFile), filepath.Join(w.dir, "attestation.pub"))
	w.vkey = copyFile(t, filepath.Join(origDir, node.LogVKeyFile), filepath.Join(w.dir, "log.vkey"))

	s.putKinds(t, "episodic", "summary", "embedding")
	aliceRec := s.seal(t, sealReq{Subject: txAlice, Kind: "episodic", Holder: "episodic-log"}, txAliceRec, txContext)
	bobRec := s.seal(t, sealReq{Subject: txBob, Kind: "episodic", Holder: "episodic-log"}, txBobRec, txContext)
	summary := s.seal(t, sealReq{Parents: []string{aliceRec.artifact}, Subjects: []string{txBob}, Kind: "summary", Holder: "summarizer"}, txSummary, txContext)
	holderKey := s.addHolder(t, txHolder)
	var held artifactView
	s.expect(t, http.StatusCreated, http.MethodPost, "/v1/artifacts",
		map[string]any{"parents": []string{aliceRec.artifact}, "kind": "embedding", "holder": txHolder}).into(t, &held)
	if held.Sealed || held.Holder != txHolder {
		t.Fatalf("registered embedding %+v, want plaintext-held by %s", held, txHolder)
	}

	// 2. The saved checkpoint, and the fork point.
	w.saved = filepath.Join(w.dir, "saved-before-forget.checkpoint")
	s.cli(t, "checkpoint", "--out", w.saved)
	w.savedSize = checkpointSize(t, w.saved, w.vkey)
	s.stop()
	forkDir := copyDir(t, origDir) // vault_e2e_test.go: modes kept
	s = startServer(t, origDir, serverOpts{Args: []string{"--cache-ttl", "1ns", "--lease-ttl", "3s"}})

	// 3. The original forgets alice and bob.
	w.alice = s.forget(t, txAlice)
	w.bob = s.forget(t, txBob)
	if w.alice.CommitmentSalt == "" || w.bob.CommitmentSalt == "" {
		t.Fatalf("the forgets answered no commitment salt: %+v %+v", w.alice, w.bob)
	}
	for _, rec := range []record{aliceRec, bobRec, summary} {
		s.shredded(t, rec)
	}
	if ack := s.ackPurge(t, w.alice.Forget, txHolder, holderKey, held.Artifact); len(ack.Missing) != 0 {
		t.Fatalf("ack of %s: %+v", txHolder, ack)
	}
	s.shred(t, w.alice.Forget, w.bob.Forget)
	w.aliceErased = s.waitErased(t, w.alice.Forget, time.Time{})
	checkForget(t, w.aliceErased, "erased", nil)
	checkForget(t, s.waitErased(t, w.bob.Forget, time.Time{}), "erased", nil)
	w.aliceAttestation = s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+w.alice.Forget+"/attestation", nil).Body
	w.bobAttestation = s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+w.bob.Forget+"/attestation", nil).Body
	since := strconv.FormatInt(w.savedSize, 10)
	w.aliceExport = filepath.Join(w.dir, "alice.export.tar.gz")
	w.bobExport = filepath.Join(w.dir, "bob.export.tar.gz")
	s.cli(t, "export", "--since", since, "--out", w.aliceExport, w.alice.Forget)
	s.cli(t, "export", "--since", since, "--out", w.bobExport, w.bob.Forget)
	if a, b := readExport(t, w.aliceExport).file("checkpoint"), readExport(t, w.bobExport).file("checkpoint"); !bytes.Equal(a, b) {
		t.Fatalf("alice's and bob's exports, made one after the other, have different checkpoints:\n%s\n%s", a, b)
	}
	w.origAfterFork = filepath.Join(w.dir, "original-after-fork.checkpoint")
	s.cli(t, "checkpoint", "--out", w.origAfterFork)
	origSize := checkpointSize(t, w.origAfterFork, w.vkey)

	// 4. The fork: the same keys, another history from the fork point on.
	// It logs more entries than the original did, so that its export can
	// carry a consistency proof from the original's size.
	f := startServer(t, forkDir, serverOpts{Args: []string{"--cache-ttl", "1ns", "--lease-ttl", "3s"}})
	for i := int64(0); i <= origSize-w.savedSize; i++ {
		f.seal(t, sealReq{Subject: fmt.Sprintf("fork-%d-%s", i, txDave), Kind: "episodic", Holder: "episodic-log"}, "only on the fork", "")
	}
	w.forkAlice = f.forget(t, txAlice)
	f.ackPurge(t, w.forkAlice.Forget, txHolder, holderKey, held.Artifact)
	f.shred(t, w.forkAlice.Forget)
	f.waitErased(t, w.forkAlice.Forget, time.Time{})
	w.forkCheckpoint = filepath.Join(w.dir, "fork.checkpoint")
	f.cli(t, "checkpoint", "--out", w.forkCheckpoint)
	forkSize := checkpointSize(t, w.forkCheckpoint, w.vkey)
	if forkSize <= origSize {
		t.Fatalf("the fork's log has %d entries, want more than the original's %d", forkSize, origSize)
	}
	w.forkExport = filepath.Join(w.dir, "fork-alice.export.tar.gz")
	f.cli(t, "export", "--since", strconv.FormatInt(origSize, 10), "--out", w.forkExport, w.forkAlice.Forget)
	w.forkExportSinceSaved = filepath.Join(w.dir, "fork-alice-since-saved.export.tar.gz")
	f.cli(t, "export", "--since", since, "--out", w.forkExportSinceSaved, w.forkAlice.Forget)
	f.stop()

	// The original grows past the fork's size; its export of alice's forget
	// then carries a consistency proof from the fork's size.
	for size, i := origSize, 0; size <= forkSize; i++ {
		s.seal(t, sealReq{Subject: fmt.Sprintf("later-%d@example.com", i), Kind: "episodic", Holder: "episodic-log"}, "later", "")
		size = s.treeSize(t)
	}
	w.aliceExportSinceFork = filepath.Join(w.dir, "alice-since-fork.export.tar.gz")
	s.cli(t, "export", "--since", strconv.FormatInt(forkSize, 10), "--out", w.aliceExportSinceFork, w.alice.Forget)
	w.latest = filepath.Join(w.dir, "latest.checkpoint")
	s.cli(t, "checkpoint", "--out", w.latest)

	// 5. The whole log, from the tiles.
	w.readLogFromTiles(t, s)
	secret, err := os.ReadFile(filepath.Join(origDir, node.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := registry.NewHasher(secret)
	if err != nil {
		t.Fatal(err)
	}
	w.forbidden = map[string]string{}
	for _, subj := range []string{txAlice, txBob} {
		sid := hasher.SID(subj)
		w.forbidden["subject id "+subj] = subj
		w.forbidden["subject local part "+subj] = strings.Split(subj, "@")[0] + "@"
		w.forbidden["sid hex of "+subj] = hex.EncodeToString(sid[:])
		w.forbidden["sid base64 of "+subj] = base64.StdEncoding.EncodeToString(sid[:])
		w.forbidden["sid base64url of "+subj] = base64.RawURLEncoding.EncodeToString(sid[:])
		w.forbidden["sid hex prefix of "+subj] = hex.EncodeToString(sid[:8])
	}
	for _, pt := range []string{txAliceRec, txBobRec, txSummary, txVector, txContext} {
		w.forbidden["plaintext "+pt] = pt
		w.forbidden["plaintext, base64 "+pt] = b64(pt)[:16]
		w.forbidden["plaintext, hex "+pt] = hex.EncodeToString([]byte(pt))[:16]
	}
	for _, rec := range []record{aliceRec, bobRec, summary} {
		w.forbidden["ciphertext of "+rec.name] = strings.TrimPrefix(rec.ciphertext, "shredd:v1:")[20:52]
	}
	w.aliceKeyCreated = -1
	for i, ev := range w.logEvents {
		if ev.Event == attest.EventKeyCreated && ev.Key.Subject == attest.Commit(txAlice, mustSalt(t, w.alice.CommitmentSalt)) {
			w.aliceKeyCreated = int64(i)
		}
	}
}

// cli runs a client command of the real binary against s and fails the
// test unless it exits 0. The flags come before the forget id (the usage
// puts it first; both orders are accepted since 6a34333).
func (s *server) cli(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	args = append([]string{cmd, "--addr", s.base, "--token-file", filepath.Join(s.dataDir, node.TokenFile)}, args...)
	code, stdout, stderr := runShredd(t, args...)
	if code != 0 {
		t.Fatalf("shredd %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// treeSize returns the size of the log's current checkpoint.
func (s *server) treeSize(t *testing.T) int64 {
	t.Helper()
	c, err := translog.ParseCheckpoint(noteText(s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body))
	if err != nil {
		t.Fatal(err)
	}
	return c.Size
}

// noteText returns the text of a signed note, up to its blank line.
func noteText(signed []byte) []byte {
	text, _, _ := bytes.Cut(signed, []byte("\n\n"))
	return append(text, '\n')
}

func logVerifier(t *testing.T, vkeyPath string) note.Verifier {
	t.Helper()
	b, err := os.ReadFile(vkeyPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkpointSize opens a saved checkpoint under the log key and returns its size.
func checkpointSize(t *testing.T, path, vkeyPath string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := translog.OpenCheckpoint(b, logVerifier(t, vkeyPath))
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return c.Size
}

func mustSalt(t *testing.T, s string) []byte {
	t.Helper()
	b, err := attest.ParseSalt(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	return to
}

// tileFetcher is a tlog.TileReader of the server's C2SP tlog-tiles over
// HTTP: nothing but /v1/log/tile/... is read.
type tileFetcher struct {
	s       *server
	fetched []string
}

func (f *tileFetcher) Height() int { return translog.TileHeight }

func (f *tileFetcher) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		b, err := f.read(tile)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (f *tileFetcher) read(tile tlog.Tile) ([]byte, error) {
	path := "/v1/log/" + translog.TilePath(tile)
	r, err := f.s.call(http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, r.Status, r.Body)
	}
	f.fetched = append(f.fetched, path)
	return r.Body, nil
}

func (f *tileFetcher) SaveTiles([]tlog.Tile, [][]byte) {}

// readLogFromTiles reads the whole log back the way an auditor does: the
// signed checkpoint, then the entry bundles (each entry a big-endian
// uint16 length and its bytes), each entry's record hash checked against
// the hash tiles by tlog.TileHashReader, which authenticates every tile
// against the checkpoint's root.
func (w *exportWorld) readLogFromTiles(t *testing.T, s *server) {
	t.Helper()
	w.logCheckpoint = s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body
	cp, err := translog.OpenCheckpoint(w.logCheckpoint, logVerifier(t, w.vkey))
	if err != nil {
		t.Fatalf("/v1/log/checkpoint: %v\n%s", err, w.logCheckpoint)
	}
	f := &tileFetcher{s: s}
	for n := int64(0); n*translog.TileWidth < cp.Size; n++ {
		width := min(translog.TileWidth, cp.Size-n*translog.TileWidth)
		b, err := f.read(tlog.Tile{H: translog.TileHeight, L: -1, N: n, W: int(width)})
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				t.Fatalf("entry bundle %d is truncated after %d entries", n, len(w.logEntries))
			}
			l := int(binary.BigEndian.Uint16(b))
			w.logEntries = append(w.logEntries, b[2:2+l])
			b = b[2+l:]
		}
		if int64(len(w.logEntries)) != n*translog.TileWidth+width {
			t.Fatalf("entry bundle %d of width %d: %d entries in all", n, width, len(w.logEntries))
		}
	}
	thr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, f)
	if root, err := tlog.TreeHash(cp.Size, thr); err != nil || root != cp.Hash {
		t.Fatalf("the hash tiles give root %v (%v), the checkpoint %v", root, err, cp.Hash)
	}
	idx := make([]int64, cp.Size)
	for i := range idx {
		idx[i] = tlog.StoredHashIndex(0, int64(i))
	}
	leaves, err := thr.ReadHashes(idx)
	if err != nil {
		t.Fatalf("the hash tiles do not verify against the checkpoint: %v", err)
	}
	pub, err := attest.ParsePublicKey(mustRead(t, w.pub))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range w.logEntries {
		if leaves[i] != tlog.RecordHash(e) {
			t.Fatalf("entry %d of the entry bundles is not the leaf %d of the tree the checkpoint signs", i, i)
		}
		ev, err := attest.OpenEvent(e, pub)
		if err != nil {
			t.Fatalf("log entry %d does not open under the attestation key: %v\n%s", i, err, e)
		}
		w.logEvents = append(w.logEvents, ev)
	}
	w.tilesFetched = f.fetched
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exportFile is one file of an export archive.
type exportFile struct {
	name string
	data []byte
}

// exportArchive is an export read with archive/tar alone (not package
// bundle), so that the tests can build archives bundle.Read would refuse.
type exportArchive struct {
	dir   string // shredd-export-<forget id>
	files []exportFile
}

func readExport(t *testing.T, path string) *exportArchive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	a := &exportArchive{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		dir, name, ok := strings.Cut(hdr.Name, "/")
		if !ok || strings.Contains(name, "/") || (a.dir != "" && dir != a.dir) || hdr.Typeflag != tar.TypeReg {
			t.Fatalf("%s: unexpected member %q", path, hdr.Name)
		}
		a.dir = dir
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a.files = append(a.files, exportFile{name, b})
	}
	return a
}

func (a *exportArchive) clone() *exportArchive {
	c := &exportArchive{dir: a.dir}
	for _, f := range a.files {
		c.files = append(c.files, exportFile{f.name, bytes.Clone(f.data)})
	}
	return c
}

// file returns the content of a file, nil when there is none.
func (a *exportArchive) file(name string) []byte {
	for _, f := range a.files {
		if f.name == name {
			return f.data
		}
	}
	return nil
}

// set replaces a file's content, or adds the file.
func (a *exportArchive) set(name string, data []byte) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files[i].data = data
			return
		}
	}
	a.files = append(a.files, exportFile{name, data})
}

func (a *exportArchive) remove(names ...string) {
	a.files = slices.DeleteFunc(a.files, func(f exportFile) bool { return slices.Contains(names, f.name) })
}

// entry returns the base name (entry-<index>-<event>) of the only entry of
// kind event.
func (a *exportArchive) entry(t *testing.T, event string) string {
	t.Helper()
	var found []string
	for _, f := range a.files {
		if base, ok := strings.CutSuffix(f.name, "-"+event+".json"); ok && strings.HasPrefix(base, "entry-") {
			found = append(found, base+"-"+event)
		}
	}
	if len(found) != 1 {
		t.Fatalf("export %s: %d %s entries, want 1", a.dir, len(found), event)
	}
	return found[0]
}

// entryNames returns the base names of the entries, in archive order.
func (a *exportArchive) entryNames() []string {
	var names []string
	for _, f := range a.files {
		if base, ok := strings.CutSuffix(f.name, ".json"); ok && strings.HasPrefix(base, "entry-") {
			names = append(names, base)
		}
	}
	return names
}

// write writes the archive as a gzip tar file and returns its path.
func (a *exportArchive) write(t *testing.T, path string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range a.files {
		if err := tw.WriteHeader(&tar.Header{Name: a.dir + "/" + f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// extract writes the archive's files into dir/<top directory> and returns
// that directory, as `tar xzf` does.
func (a *exportArchive) extract(t *testing.T, dir string) string {
	t.Helper()
	top := filepath.Join(dir, a.dir)
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range a.files {
		writeTestFile(t, top, f.name, f.data)
	}
	return top
}

// flipLetter returns a copy of b with the case of one ASCII letter
// swapped, the first at or after the middle: the file keeps its shape
// (base64 stays base64, JSON stays JSON) and only a check of its content
// can tell.
func flipLetter(t *testing.T, b []byte) []byte {
	t.Helper()
	c := bytes.Clone(b)
	for i := len(c) / 2; i < len(c); i++ {
		if ch := c[i] | 0x20; ch >= 'a' && ch <= 'z' {
			c[i] ^= 0x20
			return c
		}
	}
	t.Fatalf("no letter to flip after the middle of %q", b)
	return nil
}

// flipBase64 returns a copy of b where the standard base64 string old is
// replaced by the encoding of its bytes with bit 0 of byte i flipped
// (i < 0 counts from the end).
func flipBase64(t *testing.T, b []byte, old string, i int) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(old)
	if err != nil || !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q is not base64 found in the file (%v)", old, err)
	}
	if i < 0 {
		i += len(raw)
	}
	raw[i] ^= 1
	return bytes.Replace(b, []byte(old), []byte(base64.StdEncoding.EncodeToString(raw)), 1)
}

// proofHashLines returns the audit path lines of a c2sp.org/tlog-proof@v1.
func proofHashLines(proof []byte) []string {
	head, _, _ := strings.Cut(string(proof), "\n\n")
	lines := strings.Split(head, "\n")
	for len(lines) > 0 && !strings.HasPrefix(lines[0], "index ") {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return nil
	}
	return lines[1:]
}

// verifyArgs are the arguments of `shredd verify` on an export.
type verifyArgs struct {
	export, key, logKey, saved, subject, salt string
}

func (v verifyArgs) run(t *testing.T) (int, string) {
	t.Helper()
	args := []string{"verify", v.export, "--key", v.key, "--log-key", v.logKey}
	if v.subject != "" {
		args = append(args, "--subject", v.subject, "--salt", v.salt)
	}
	if v.saved != "" {
		args = append(args, "--checkpoint", v.saved)
	}
	code, stdout, stderr := runShredd(t, args...)
	return code, stdout + stderr
}

// The events of a forget's lifecycle, in log order.
var lifecycle = []string{attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventHolderAck, attest.EventEpochCompleted, attest.EventErasureAttested}

// TestTransparencyExport checks the export of the story's forget of alice
// with `shredd verify` (keys, subject, salt and a checkpoint saved before
// the forget), that its entries are the log's own, and that the whole log
// read back from its tiles alone holds every lifecycle event of the story,
// each signed, and nothing of the subjects' ids or data.
func TestTransparencyExport(t *testing.T) {
	w := theExportWorld(t)

	good := verifyArgs{export: w.aliceExport, key: w.pub, logKey: w.vkey, saved: w.saved, subject: txAlice, salt: w.alice.CommitmentSalt}
	code, out := good.run(t)
	if code != 0 || !strings.Contains(out, "VERIFIED: forget "+w.alice.Forget) || strings.Contains(out, "NOT VERIFIED") {
		t.Fatalf("shredd verify of alice's export: exit %d\n%s", code, out)
	}
	for _, want := range []string{"ok    attestation", "ok    checkpoint", "ok    key          same subject commitment",
		"ok    subject", "ok    consistency  the log extends the saved checkpoint of size " + strconv.FormatInt(w.savedSize, 10)} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	ex := readExport(t, w.aliceExport)
	names := ex.entryNames()
	var kinds []string
	for _, name := range names {
		if !strings.Contains(out, "ok    entry        "+name+": signed, included") {
			t.Errorf("the report does not name entry %s:\n%s", name, out)
		}
		parts := strings.SplitN(name, "-", 3)
		idx, err := strconv.Atoi(parts[1])
		if err != nil || idx >= len(w.logEntries) {
			t.Fatalf("entry %s: no such index in the log of %d entries", name, len(w.logEntries))
		}
		// The export's entries are the log's, byte for byte.
		if !bytes.Equal(ex.file(name+".json"), w.logEntries[idx]) {
			t.Errorf("%s.json is not entry %d of the log as the tiles serve it", name, idx)
		}
		if w.logEvents[idx].Event != parts[2] {
			t.Errorf("%s: the log's entry %d is a %s event", name, idx, w.logEvents[idx].Event)
		}
		kinds = append(kinds, parts[2])
	}
	if !slices.Equal(kinds, lifecycle) {
		t.Errorf("alice's export holds the entries %v, want one of each of %v in log order", names, lifecycle)
	}
	if ex.file("consistency.proof") == nil {
		t.Errorf("an export asked with --since has no consistency.proof")
	}
	// Without --subject and --salt (optional for an export: the regulator
	// may not hold them) the subject is reported not checked and everything
	// else checked.
	noSubject := good
	noSubject.subject, noSubject.salt = "", ""
	if code, out := noSubject.run(t); code != 0 || !strings.Contains(out, "-     subject      not checked") {
		t.Errorf("shredd verify of alice's export without --subject and --salt: exit %d\n%s", code, out)
	}
	// bob's export verifies too (no holder ack: his lineage was sealed).
	bobArgs := verifyArgs{export: w.bobExport, key: w.pub, logKey: w.vkey, saved: w.saved, subject: txBob, salt: w.bob.CommitmentSalt}
	if code, out := bobArgs.run(t); code != 0 || strings.Contains(out, "holder_ack") {
		t.Errorf("shredd verify of bob's export: exit %d\n%s", code, out)
	}

	// The whole log, from the tiles alone (read and audited by the story:
	// every entry bundle, every leaf checked against the hash tiles, which
	// tlog.TileHashReader authenticates against the signed checkpoint).
	t.Logf("log of %d entries read from %d tile fetches: %v", len(w.logEntries), len(w.tilesFetched), w.tilesFetched)
	if !slices.ContainsFunc(w.tilesFetched, func(p string) bool { return strings.HasPrefix(p, "/v1/log/tile/entries/") }) ||
		!slices.ContainsFunc(w.tilesFetched, func(p string) bool { return strings.HasPrefix(p, "/v1/log/tile/0/") }) {
		t.Errorf("the log was not read from both entry bundles and hash tiles: %v", w.tilesFetched)
	}
	aliceC := attest.Commit(txAlice, mustSalt(t, w.alice.CommitmentSalt))
	bobC := attest.Commit(txBob, mustSalt(t, w.bob.CommitmentSalt))
	holderPub := storyKey(txHolder).Public().(ed25519.PublicKey)
	at := map[string]int{} // event → log index
	find := func(what string, match func(ev *attest.Event) bool) int {
		t.Helper()
		var idx []int
		for i, ev := range w.logEvents {
			if match(ev) {
				idx = append(idx, i)
			}
		}
		if len(idx) != 1 {
			t.Errorf("the log holds %d %s entries, want 1", len(idx), what)
			return -1
		}
		at[what] = idx[0]
		return idx[0]
	}
	aliceKey := find("alice's key_created", func(ev *attest.Event) bool {
		return ev.Event == attest.EventKeyCreated && ev.Key.Subject == aliceC && ev.Key.Generation == 1
	})
	bobKey := find("bob's key_created", func(ev *attest.Event) bool {
		return ev.Event == attest.EventKeyCreated && ev.Key.Subject == bobC && ev.Key.Generation == 1
	})
	find("alice's forget_committed", func(ev *attest.Event) bool {
		return ev.Event == attest.EventForgetCommitted && ev.Forget.Forget == w.alice.Forget && ev.Forget.Subject == aliceC &&
			ev.Forget.Generation == 1 && ev.Forget.KeyCreated == int64(aliceKey) && ev.Forget.Barrier == w.alice.Barrier
	})
	find("bob's forget_committed", func(ev *attest.Event) bool {
		return ev.Event == attest.EventForgetCommitted && ev.Forget.Forget == w.bob.Forget && ev.Forget.Subject == bobC &&
			ev.Forget.KeyCreated == int64(bobKey)
	})
	find("ann-index's holder_ack", func(ev *attest.Event) bool {
		return ev.Event == attest.EventHolderAck && ev.Ack.Forget == w.alice.Forget && ev.Ack.Holder == txHolder &&
			ev.Ack.PublicKey.Equal(holderPub) && ev.Ack.Artifacts == 1 && len(ev.Ack.Signature) == ed25519.SignatureSize
	})
	find("epoch_completed", func(ev *attest.Event) bool {
		return ev.Event == attest.EventEpochCompleted && ev.Epoch.Epoch == w.aliceErased.Epoch && len(ev.Epoch.Retired) > 0
	})
	find("alice's erasure_attested", func(ev *attest.Event) bool {
		return ev.Event == attest.EventErasureAttested && ev.Attested.Forget == w.alice.Forget && ev.Attested.Subject == aliceC &&
			ev.Attested.AttestationSHA256 == attest.Digest(w.aliceAttestation)
	})
	find("bob's erasure_attested", func(ev *attest.Event) bool {
		return ev.Event == attest.EventErasureAttested && ev.Attested.Forget == w.bob.Forget && ev.Attested.Subject == bobC &&
			ev.Attested.AttestationSHA256 == attest.Digest(w.bobAttestation)
	})
	order := []string{"alice's key_created", "alice's forget_committed", "ann-index's holder_ack", "epoch_completed", "alice's erasure_attested"}
	for i := 1; i < len(order); i++ {
		if at[order[i-1]] >= at[order[i]] {
			t.Errorf("the log holds %s at %d, not before %s at %d", order[i-1], at[order[i-1]], order[i], at[order[i]])
		}
	}
	if int64(at["alice's key_created"]) >= w.savedSize || int64(at["alice's forget_committed"]) < w.savedSize {
		t.Errorf("the checkpoint saved before the forget (size %d) does not fall between alice's key (%d) and her forget (%d)",
			w.savedSize, at["alice's key_created"], at["alice's forget_committed"])
	}

	// No raw subject id, sid, plaintext or ciphertext in any entry, signed
	// envelope or decoded payload.
	for i, e := range w.logEntries {
		var env attest.Envelope
		if err := json.Unmarshal(e, &env); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		for what, v := range w.forbidden {
			if bytes.Contains(e, []byte(v)) || bytes.Contains(env.Payload, []byte(v)) {
				t.Errorf("log entry %d (%s) holds the %s:\n%s", i, w.logEvents[i].Event, what, env.Payload)
			}
		}
	}
}

// TestExportTamper makes modified archives from a real export and checks
// that `shredd verify` refuses each with exit status 1 and a message
// naming the file or the check that failed.
func TestExportTamper(t *testing.T) {
	w := theExportWorld(t)
	dir := t.TempDir()
	base := readExport(t, w.aliceExport)
	bobEx := readExport(t, w.bobExport)
	good := verifyArgs{export: w.aliceExport, key: w.pub, logKey: w.vkey, saved: w.saved, subject: txAlice, salt: w.alice.CommitmentSalt}
	if code, out := good.run(t); code != 0 {
		t.Fatalf("the untouched export does not verify: exit %d\n%s", code, out)
	}

	// Another log key with the same origin (name) as the log's, and another
	// attestation key.
	origin := logVerifier(t, w.vkey).Name()
	otherSKey, otherVKey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := note.NewSigner(otherSKey)
	if err != nil {
		t.Fatal(err)
	}
	_, strangerVKey, _ := note.GenerateKey(rand.Reader, "shredd/0123456789abcdef")
	otherVKeyFile := writeTestFile(t, dir, "other-origin-same-name.vkey", []byte(otherVKey+"\n"))
	strangerVKeyFile := writeTestFile(t, dir, "other-log.vkey", []byte(strangerVKey+"\n"))
	otherPub := pubFile(t, dir, "other-attestation.pub", e2eKey("other-key"))
	resign := func(signed []byte) []byte {
		b, err := note.Sign(&note.Note{Text: string(noteText(signed))}, otherSigner)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	savedByOtherKey := writeTestFile(t, dir, "saved-by-other-key.checkpoint", resign(mustRead(t, w.saved)))

	type tamperCase struct {
		name string
		edit func(a *exportArchive) // applied to a copy of alice's export
		args func(v *verifyArgs)    // changes the arguments of shredd verify
		code int                    // 1 unless the tampering must not matter (0)
		want []string               // in the output
	}
	var cases []tamperCase

	// A byte flipped in each file in turn.
	for _, f := range base.files {
		c := tamperCase{name: "flip a byte of " + f.name, code: 1}
		name := f.name
		c.edit = func(a *exportArchive) { a.set(name, flipLetter(t, a.file(name))) }
		switch {
		case name == "README.txt" || name == "check-inclusion.py":
			// Instructions for people and a tool for them, not evidence:
			// shredd verify reads neither, and a regulator runs a reviewed
			// copy of the checker (bundle/check-inclusion.py in shredd's
			// repository), not one an operator shipped.
			c.code, c.want = 0, []string{"VERIFIED: forget " + w.alice.Forget}
		case name == "attestation.pub" || name == "log.vkey":
			// The keys inside the export are ignored when the verifier gives
			// its own (--key and --log-key, obtained out of band): a
			// substituted key in the archive cannot make it verify.
			c.code, c.want = 0, []string{"VERIFIED: forget " + w.alice.Forget}
		case name == "consistency.proof":
			c.want = []string{"consistency"}
		case strings.HasPrefix(name, "entry-"):
			c.want = []string{strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".tlog-proof")}
		default:
			c.want = []string{name}
		}
		cases = append(cases, c)
	}

	// The audit paths and the entries.
	ackName := base.entry(t, attest.EventHolderAck)
	fcName := base.entry(t, attest.EventForgetCommitted)
	cases = append(cases,
		tamperCase{name: "drop a hash line of a proof", code: 1, want: []string{fcName, "not in tree"}, edit: func(a *exportArchive) {
			p := string(a.file(fcName + ".tlog-proof"))
			hashes := proofHashLines([]byte(p))
			if len(hashes) == 0 {
				t.Fatalf("%s.tlog-proof has no hash lines:\n%s", fcName, p)
			}
			a.set(fcName+".tlog-proof", []byte(strings.Replace(p, hashes[len(hashes)/2]+"\n", "", 1)))
		}},
		tamperCase{name: "flip a hash of a proof", code: 1, want: []string{ackName, "not in tree"}, edit: func(a *exportArchive) {
			p := a.file(ackName + ".tlog-proof")
			a.set(ackName+".tlog-proof", flipBase64(t, p, proofHashLines(p)[0], 0))
		}},
		tamperCase{name: "swap the contents of two entries, names kept", code: 1, want: []string{"proves index"}, edit: func(a *exportArchive) {
			for _, ext := range []string{".json", ".tlog-proof"} {
				x, y := a.file(fcName+ext), a.file(ackName+ext)
				a.set(fcName+ext, y)
				a.set(ackName+ext, x)
			}
		}},
		tamperCase{name: "swap two entries' data, proofs kept", code: 1, want: []string{"not in tree"}, edit: func(a *exportArchive) {
			x, y := a.file(fcName+".json"), a.file(ackName+".json")
			a.set(fcName+".json", y)
			a.set(ackName+".json", x)
		}},
		tamperCase{name: "drop the proof of an entry", code: 1, want: []string{ackName, "needs both"}, edit: func(a *exportArchive) {
			a.remove(ackName + ".tlog-proof")
		}},
		tamperCase{name: "add an unknown file", code: 1, want: []string{"unknown file", "notes.txt"}, edit: func(a *exportArchive) {
			a.set("notes.txt", []byte("trust me\n"))
		}},
		tamperCase{name: "drop the consistency proof", code: 1, want: []string{"no consistency.proof", "since=" + strconv.FormatInt(w.savedSize, 10)},
			edit: func(a *exportArchive) { a.remove("consistency.proof") }},
	)
	for _, event := range lifecycle {
		name := base.entry(t, event)
		cases = append(cases, tamperCase{name: "drop the " + event + " entry", code: 1, want: []string{event},
			edit: func(a *exportArchive) { a.remove(name+".json", name+".tlog-proof") }})
	}

	// Entries of another forget of the same log, at the same tree size: each
	// is signed and included in the same checkpoint, and still refused.
	for _, c := range []struct {
		event string
		want  string
	}{
		{attest.EventForgetCommitted, "the forget_committed entry is about another forget"},
		{attest.EventErasureAttested, "the erasure_attested entry does not name this attestation"},
		{attest.EventKeyCreated, "the key_created entry is not the one the forget_committed entry names"},
	} {
		mine, theirs := base.entry(t, c.event), bobEx.entry(t, c.event)
		cases = append(cases, tamperCase{name: "replace the " + c.event + " entry with the other forget's", code: 1, want: []string{c.want},
			edit: func(a *exportArchive) {
				a.remove(mine+".json", mine+".tlog-proof")
				a.set(theirs+".json", bobEx.file(theirs+".json"))
				a.set(theirs+".tlog-proof", bobEx.file(theirs+".tlog-proof"))
			}})
	}
	cases = append(cases,
		tamperCase{name: "add the other forget's key_created entry", code: 1, want: []string{"key_created"}, edit: func(a *exportArchive) {
			theirs := bobEx.entry(t, attest.EventKeyCreated)
			a.set(theirs+".json", bobEx.file(theirs+".json"))
			a.set(theirs+".tlog-proof", bobEx.file(theirs+".tlog-proof"))
		}},
		tamperCase{name: "replace the attestation with the other forget's", code: 1, want: []string{"attestation.json is about forget " + w.bob.Forget},
			edit: func(a *exportArchive) { a.set("attestation.json", bobEx.file("attestation.json")) }},
	)

	// Checkpoints and keys.
	cases = append(cases,
		tamperCase{name: "a saved checkpoint newer than the export", code: 1, want: []string{"newer than the export's"},
			args: func(v *verifyArgs) { v.saved = w.latest }},
		tamperCase{name: "a saved checkpoint signed by another log key", code: 1, want: []string{"saved checkpoint", "verification failed"},
			args: func(v *verifyArgs) { v.saved = savedByOtherKey }},
		tamperCase{name: "the export's checkpoint and proofs signed by another log key", code: 1, want: []string{"checkpoint", "verification failed"},
			edit: func(a *exportArchive) {
				old := a.file("checkpoint")
				forged := resign(old)
				for i := range a.files {
					a.files[i].data = bytes.Replace(a.files[i].data, old, forged, 1)
				}
				a.set("log.vkey", []byte(otherVKey+"\n"))
			}},
		tamperCase{name: "the export's checkpoint and proofs signed by another log key, and that key given", code: 1,
			want: []string{"saved checkpoint", "verification failed"},
			edit: func(a *exportArchive) {
				old := a.file("checkpoint")
				forged := resign(old)
				for i := range a.files {
					a.files[i].data = bytes.Replace(a.files[i].data, old, forged, 1)
				}
			},
			args: func(v *verifyArgs) { v.logKey = otherVKeyFile }},
		tamperCase{name: "wrong --key", code: 1, want: []string{"attestation.json", "signature"},
			args: func(v *verifyArgs) { v.key = otherPub }},
		tamperCase{name: "wrong --log-key of the same name", code: 1, want: []string{"checkpoint", "verification failed"},
			args: func(v *verifyArgs) { v.logKey = otherVKeyFile }},
		tamperCase{name: "wrong --log-key of another log", code: 1, want: []string{"checkpoint", "verification failed"},
			args: func(v *verifyArgs) { v.logKey = strangerVKeyFile }},
		tamperCase{name: "wrong --subject", code: 1, want: []string{"subject"},
			args: func(v *verifyArgs) { v.subject = txBob }},
		tamperCase{name: "wrong --salt", code: 1, want: []string{"subject"},
			args: func(v *verifyArgs) { v.salt = w.bob.CommitmentSalt }},
	)

	// The forked log: the fork (a copy of the data directory taken at the
	// saved checkpoint, run with the same keys) erased alice too, with
	// another history. A checkpoint saved after the fork point on either
	// side exposes the other's export; one saved before cannot.
	cases = append(cases,
		tamperCase{name: "the fork's export against a checkpoint of the original after the fork", code: 1,
			want: []string{"does not extend the saved checkpoint", "forked"},
			args: func(v *verifyArgs) {
				v.export, v.saved, v.salt = w.forkExport, w.origAfterFork, w.forkAlice.CommitmentSalt
			}},
		tamperCase{name: "the original's export against a checkpoint of the fork", code: 1,
			want: []string{"does not extend the saved checkpoint", "forked"},
			args: func(v *verifyArgs) { v.export, v.saved = w.aliceExportSinceFork, w.forkCheckpoint }},
		tamperCase{name: "the fork's export against the checkpoint saved at the fork point", code: 0,
			want: []string{"VERIFIED: forget " + w.forkAlice.Forget},
			args: func(v *verifyArgs) {
				v.export, v.salt = w.forkExportSinceSaved, w.forkAlice.CommitmentSalt
			}},
		tamperCase{name: "the original's export since the fork's size, against the checkpoint saved at the fork point", code: 1,
			want: []string{"consistency.proof goes from size"},
			args: func(v *verifyArgs) { v.export = w.aliceExportSinceFork }},
	)

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := good
			if c.edit != nil {
				a := base.clone()
				c.edit(a)
				v.export = a.write(t, filepath.Join(dir, fmt.Sprintf("case-%02d.tar.gz", i)))
			}
			if c.args != nil {
				c.args(&v)
			}
			code, out := v.run(t)
			if code != c.code {
				t.Fatalf("shredd verify: exit %d, want %d\n%s", code, c.code, out)
			}
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Errorf("the output does not say %q:\n%s", want, out)
				}
			}
			if c.code != 0 && (!strings.Contains(out, "FAIL") || strings.Contains(out, "VERIFIED: forget")) {
				t.Errorf("a refused export is not reported as failed:\n%s", out)
			}
			t.Logf("exit %d: %s", code, failLine(out))
		})
	}
}

// failLine returns the FAIL line of a report, or its last line.
func failLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "FAIL") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// recipeTools are the programs the README.txt recipe runs, with the Debian
// packages that hold them (scripts/test.sh installs them).
var recipeTools = [][2]string{{"bash", "bash"}, {"openssl", "openssl"}, {"jq", "jq"}, {"xxd", "xxd"},
	{"python3", "python3"}, {"base64", "coreutils"}, {"sha256sum", "coreutils"}, {"cmp", "diffutils"}}

// requireRecipeTools fails the test (never skips it) when a tool of the
// standard-tools recipe is missing.
func requireRecipeTools(t *testing.T) {
	t.Helper()
	for _, tool := range recipeTools {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Fatalf("the export's standard-tools check needs %s (Debian package %s), which is not installed: "+
				"run ./scripts/test.sh, which installs it, or apt-get install %s", tool[0], tool[1], tool[1])
		}
	}
}

// recipe returns the shell recipe of an export's README.txt: the lines
// between "# recipe: begin" and "# recipe: end".
func recipe(t *testing.T, readme []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(readme), "# recipe: begin\n")
	body, _, ok2 := strings.Cut(rest, "# recipe: end\n")
	if !ok || !ok2 || strings.TrimSpace(body) == "" {
		t.Fatalf("README.txt has no recipe between \"# recipe: begin\" and \"# recipe: end\":\n%s", readme)
	}
	return body
}

// runRecipe extracts the archive and runs the recipe of its README.txt
// with bash -e in the extracted directory, as a regulator pasting it
// would; it returns the exit status and the output.
func runRecipe(t *testing.T, a *exportArchive, readme []byte) (int, string) {
	t.Helper()
	requireRecipeTools(t)
	dir := t.TempDir()
	top := a.extract(t, filepath.Join(dir, "x"))
	script := writeTestFile(t, dir, "recipe.sh", []byte(recipe(t, readme)))
	cmd := exec.Command("bash", "-e", script)
	cmd.Dir = top
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("bash %s: %v", script, err)
	return 0, ""
}

// checkRecipeOK checks the output of the recipe on a good export of n
// entries: every openssl line (the attestation, each entry, the
// checkpoint) verified, every inclusion proof ok, every proof against the
// checkpoint, and the logged SHA-256 equal to the attestation's.
func checkRecipeOK(t *testing.T, code int, out string, entries []string) {
	t.Helper()
	n := len(entries)
	if code != 0 {
		t.Fatalf("the recipe exits %d:\n%s", code, out)
	}
	if got := strings.Count(out, "Signature Verified Successfully"); got != n+2 {
		t.Errorf("%d openssl lines verified, want %d (the attestation, %d entries, the checkpoint):\n%s", got, n+2, n, out)
	}
	if strings.Contains(out, "Verification Failure") || strings.Contains(out, "fail:") {
		t.Errorf("a check of the recipe failed:\n%s", out)
	}
	for _, e := range entries {
		idx := strings.SplitN(e, "-", 3)[1]
		if !strings.Contains(out, "ok: entry "+idx+" is in tree") {
			t.Errorf("python3 check-inclusion.py did not print ok for %s:\n%s", e, out)
		}
		if !strings.Contains(out, e+".tlog-proof: same checkpoint") {
			t.Errorf("%s.tlog-proof is not reported against the same checkpoint:\n%s", e, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("the recipe printed %d lines", len(lines))
	}
	logged, file := strings.TrimSpace(lines[len(lines)-2]), strings.Fields(lines[len(lines)-1])
	if len(logged) != 64 || len(file) != 2 || file[0] != logged || file[1] != "attestation.json" {
		t.Errorf("the logged SHA-256 %q and the attestation's %q differ", logged, lines[len(lines)-1])
	}
}

// TestExportTamperIndependentTools runs the README.txt recipe (openssl,
// jq, xxd, base64 and the python3 inclusion checker; no shredd code) on a
// real export, then shows that the standard tools catch the tampering
// shredd verify catches: a flipped signature byte (openssl), a flipped
// proof hash (python3), a flipped checkpoint signature (openssl).
func TestExportTamperIndependentTools(t *testing.T) {
	requireRecipeTools(t)
	w := theExportWorld(t)
	base := readExport(t, w.aliceExport)
	readme := base.file("README.txt")
	code, out := runRecipe(t, base, readme)
	checkRecipeOK(t, code, out, base.entryNames())

	var env struct {
		Signatures []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(base.file("attestation.json"), &env); err != nil || len(env.Signatures) != 1 {
		t.Fatalf("attestation.json: %v", err)
	}
	ackName := base.entry(t, attest.EventHolderAck)
	sigLine := func(checkpoint []byte) string {
		for _, l := range strings.Split(string(checkpoint), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "—" {
				return f[2]
			}
		}
		t.Fatalf("no signature line in the checkpoint:\n%s", checkpoint)
		return ""
	}
	for _, c := range []struct {
		name string
		edit func(a *exportArchive)
		want string // in the recipe's output
	}{
		{"flip a byte of the attestation's signature", func(a *exportArchive) {
			a.set("attestation.json", flipBase64(t, a.file("attestation.json"), env.Signatures[0].Sig, 10))
		}, "Signature Verification Failure"},
		{"flip a hash of an inclusion proof", func(a *exportArchive) {
			p := a.file(ackName + ".tlog-proof")
			a.set(ackName+".tlog-proof", flipBase64(t, p, proofHashLines(p)[0], 0))
		}, "fail: computed root"},
		{"flip a byte of the checkpoint's signature", func(a *exportArchive) {
			cp := a.file("checkpoint")
			forged := flipBase64(t, cp, sigLine(cp), -1)
			for i := range a.files {
				a.files[i].data = bytes.Replace(a.files[i].data, cp, forged, 1)
			}
		}, "Signature Verification Failure"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			c.edit(a)
			code, out := runRecipe(t, a, readme)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Fatalf("the recipe exits %d, want a failure saying %q:\n%s", code, c.want, out)
			}
			// shredd verify refuses the same archive.
			v := verifyArgs{export: a.write(t, filepath.Join(t.TempDir(), "tampered.tar.gz")), key: w.pub, logKey: w.vkey,
				saved: w.saved, subject: txAlice, salt: w.alice.CommitmentSalt}
			if code, vout := v.run(t); code != 1 {
				t.Fatalf("shredd verify of the same archive: exit %d, want 1\n%s", code, vout)
			}
			t.Logf("recipe: exit %d, last lines:\n%s", code, tail(strings.TrimSpace(out), 3))
		})
	}
}

// TestExampleExport checks the example export committed under
// docs/examples (made once by docs/examples/make-walkthrough-export.sh) as
// its README says a regulator does: with shredd verify, given the keys,
// the subject, the salt and the checkpoint saved before the forget; and
// with the standard-tools recipe of its README.txt.
func TestExampleExport(t *testing.T) {
	const dir = "../../docs/examples/"
	check := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, dir+"walkthrough.export.check"))), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("walkthrough.export.check: bad line %q", line)
		}
		check[k] = v
	}
	for _, k := range []string{"export", "forget", "key", "log-key", "checkpoint", "subject", "salt"} {
		if check[k] == "" {
			t.Fatalf("walkthrough.export.check has no %s", k)
		}
	}
	v := verifyArgs{export: dir + check["export"], key: dir + check["key"], logKey: dir + check["log-key"],
		saved: dir + check["checkpoint"], subject: check["subject"], salt: check["salt"]}
	code, out := v.run(t)
	if code != 0 || !strings.Contains(out, "VERIFIED: forget "+check["forget"]) {
		t.Fatalf("shredd verify of the example export: exit %d\n%s", code, out)
	}
	a := readExport(t, v.export)
	for _, want := range append(a.entryNames(), "ok    subject", "ok    consistency  the log extends the saved checkpoint") {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
	for _, event := range []string{attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventEpochCompleted, attest.EventErasureAttested} {
		a.entry(t, event)
	}
	// The keys in the archive are those given beside it.
	if !bytes.Equal(a.file("attestation.pub"), mustRead(t, v.key)) || !bytes.Equal(a.file("log.vkey"), mustRead(t, v.logKey)) {
		t.Errorf("the example export's keys are not the ones published beside it")
	}
	// Another subject does not open its commitment.
	wrong := v
	wrong.subject = "bob@example.com"
	if code, out := wrong.run(t); code != 1 {
		t.Errorf("shredd verify of the example export for bob: exit %d, want 1\n%s", code, out)
	}

	requireRecipeTools(t)
	code, out = runRecipe(t, a, a.file("README.txt"))
	checkRecipeOK(t, code, out, a.entryNames())
}
