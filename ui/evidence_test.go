package ui_test

// The page's verifier (static/verify.js) against the shared corpus of
// evidence cases and against the Go reader (package bundle), under Node:
// every corpus case must give the corpus's verdict and reason code, and
// random archives and JSON must get the same reason code from both
// readers (the differential test and fuzz target). The same corpus runs
// in Chromium from file:// in evidence_browser_test.go.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkit/evidence"
)

const evidenceDir = "../testdata/evidence"

var exportMutants = flag.Int("evidence-mutants", 12, "mutants of each valid corpus export in TestEvidenceDifferentialExport")

// evidenceCase is a case of testdata/evidence/cases.json, its files read.
type evidenceCase struct{ evidence.OnDisk }

func readEvidence(t testing.TB) []evidenceCase {
	var out []evidenceCase
	for _, c := range evidence.MustRead(t, evidenceDir) {
		out = append(out, evidenceCase{c})
	}
	return out
}

// request is one request to the harness (testdata/harness.js).
func (c *evidenceCase) request() map[string]any {
	b64 := func(b []byte) any {
		if b == nil {
			return nil
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	if c.AttestationFile != nil {
		return map[string]any{"op": "attestation", "attestation": b64(c.AttestationFile), "key": b64(c.KeyFile),
			"subject": c.Subject, "salt": c.Salt}
	}
	witnesses := []any{}
	for _, w := range c.WitnessFiles {
		witnesses = append(witnesses, b64(w))
	}
	return map[string]any{"op": "export", "export": b64(c.ExportFile), "key": b64(c.KeyFile), "log_key": b64(c.LogKeyFile),
		"subject": c.Subject, "salt": c.Salt, "saved": b64(c.SavedFile), "witnesses": witnesses, "witnesses_required": c.WitnessesRequired}
}

// verdict is the corpus's name of an answer: "usage" for the reader's
// usage signal (the code usage: nothing was checked), else verified or
// refused.
func (a answer) verdict() string {
	switch {
	case a.Code == bundle.ReasonUsage && !a.Verified:
		return "usage"
	case a.Verified:
		return "verified"
	}
	return "refused"
}

// answer is the harness's answer.
type answer struct {
	Verified bool     `json:"verified"`
	Code     string   `json:"code"`
	Failed   string   `json:"failed"`
	Detail   string   `json:"detail"`
	SHA256   string   `json:"sha256"`
	Names    []string `json:"names"`
}

// nodeHarness is a long-lived node running testdata/harness.js.
type nodeHarness struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startNode(t testing.TB) *nodeHarness {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("the verifier's differential tests need Node.js: run ./scripts/test-node.sh, which installs it")
	}
	cmd := exec.Command(node, "testdata/harness.js")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &nodeHarness{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return h
}

func (h *nodeHarness) ask(t testing.TB, req map[string]any) answer {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("node harness: %v", err)
	}
	reply, err := h.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("node harness: %v", err)
	}
	var a answer
	if err := json.Unmarshal(reply, &a); err != nil {
		t.Fatalf("node harness: %v: %s", err, reply)
	}
	return a
}

// TestEvidenceCorpusNode runs every corpus case through the page's
// verifier under Node: the verdict and the reason code must be the
// corpus's (and so the Go reader's: bundle's TestEvidenceCorpus).
func TestEvidenceCorpusNode(t *testing.T) {
	h := startNode(t)
	for _, c := range readEvidence(t) {
		a := h.ask(t, c.request())
		if verdict := a.verdict(); verdict != c.Verdict || a.Code != c.Reason {
			t.Errorf("%s (%s): the page says %s %s (%s: %s), want %s %s", c.Name, c.About, verdict, a.Code, a.Failed, a.Detail, c.Verdict, c.Reason)
		}
	}
}

// goStrict runs the Go reader's step op on data and returns the reason
// code and a digest of what it read.
func goStrict(op string, data []byte) (string, string) {
	switch op {
	case "gunzip":
		out, err := bundle.Gunzip(data)
		if err != nil {
			return bundle.Reason(err), ""
		}
		d := sha256.Sum256(out)
		return "ok", hex.EncodeToString(d[:])
	case "untar":
		ms, err := bundle.Untar(data)
		if err != nil {
			return bundle.Reason(err), ""
		}
		var names bytes.Buffer
		for _, m := range ms {
			names.WriteString(m.Name)
			if !m.Dir {
				d := sha256.Sum256(m.Data)
				names.WriteString(":" + hex.EncodeToString(d[:]))
			}
			names.WriteByte('\n')
		}
		return "ok", names.String()
	case "bundle":
		_, err := bundle.ReadBytes(data)
		return bundle.Reason(err), ""
	case "json":
		return bundle.Reason(bundle.CheckJSON(data)), ""
	case "key":
		_, err := bundle.CheckPublicKeyFile(data)
		return bundle.Reason(err), ""
	case "logkey":
		_, err := bundle.CheckLogKeyFile(data)
		return bundle.Reason(err), ""
	}
	panic(op)
}

// differ runs op on data through both readers and reports a disagreement
// (reason code, or what was read when both accept).
func differ(t testing.TB, h *nodeHarness, op string, data []byte) error {
	t.Helper()
	code, digest := goStrict(op, data)
	a := h.ask(t, map[string]any{"op": op, "data": base64.StdEncoding.EncodeToString(data)})
	jsDigest := a.SHA256
	if op == "untar" && a.Code == "ok" {
		var b bytes.Buffer
		for _, n := range a.Names {
			b.WriteString(n + "\n")
		}
		jsDigest = b.String()
	}
	if code != a.Code || (code == "ok" && digest != jsDigest) {
		return fmt.Errorf("%s of %d bytes: Go says %s, the page %s (%s)", op, len(data), code, a.Code, a.Detail)
	}
	return nil
}

// seeds are the inputs the differential test mutates: every corpus
// export (gzip and bundle), its tar, and the JSON and key files inside.
func seeds(t testing.TB) map[string][][]byte {
	s := map[string][][]byte{}
	for _, c := range readEvidence(t) {
		s["gunzip"] = append(s["gunzip"], c.ExportFile)
		s["bundle"] = append(s["bundle"], c.ExportFile)
		s["key"] = append(s["key"], c.KeyFile)
		s["logkey"] = append(s["logkey"], c.LogKeyFile)
		if tr, err := bundle.Gunzip(c.ExportFile); err == nil {
			s["untar"] = append(s["untar"], tr)
			if ms, err := bundle.Untar(tr); err == nil {
				for _, m := range ms {
					if bytes.HasSuffix([]byte(m.Name), []byte(".json")) {
						s["json"] = append(s["json"], m.Data)
					}
				}
			}
		}
	}
	s["json"] = append(s["json"], []byte(`{"a":[1,-0,2e3,"\ud83d\ude00\u00e9",true,false,null,{}],"b":9007199254740991}`))
	return s
}

// mutate returns a random mutant of b: flipped, inserted, deleted or
// duplicated bytes, a cut, or a splice of interesting values.
func mutate(r *rand.Rand, b []byte) []byte {
	out := bytes.Clone(b)
	interesting := [][]byte{{0}, {0xff}, {0x80}, {0x1f, 0x8b}, []byte("\xef\xbb\xbf"), []byte(`"`), []byte(`\u`), []byte(`\ud800`), []byte(","),
		[]byte("9007199254740992"), []byte("1.5"), []byte("ustar  \x00"), []byte("x"), []byte("L"), []byte("0"), []byte(" "), []byte("\n"), make([]byte, 512)}
	for n := 1 + r.IntN(3); n > 0; n-- {
		if len(out) == 0 {
			out = append(out, interesting[r.IntN(len(interesting))]...)
			continue
		}
		i := r.IntN(len(out))
		switch r.IntN(7) {
		case 0:
			out[i] ^= 1 << r.IntN(8)
		case 1:
			out[i] = byte(r.IntN(256))
		case 2:
			v := interesting[r.IntN(len(interesting))]
			out = append(out[:i], append(bytes.Clone(v), out[i:]...)...)
		case 3:
			j := min(len(out), i+1+r.IntN(16))
			out = append(out[:i], out[j:]...)
		case 4:
			out = out[:i]
		case 5:
			j := min(len(out), i+1+r.IntN(64))
			out = append(out[:j], append(bytes.Clone(out[i:j]), out[j:]...)...)
		case 6:
			v := interesting[r.IntN(len(interesting))]
			copy(out[i:], v)
		}
	}
	return out
}

// mutateGzip mutates the data inside a gzip member, or the member itself.
func mutateGzip(r *rand.Rand, gz []byte) []byte {
	if r.IntN(2) == 0 {
		return mutate(r, gz)
	}
	tr, err := bundle.Gunzip(gz)
	if err != nil {
		return mutate(r, gz)
	}
	return gzipOf(mutate(r, tr), r.IntN(10))
}

// TestEvidenceDifferential is the bounded run of the differential test:
// the seeds and a fixed set of mutants of each through the Go reader and
// the page's, which must agree on every reason code (and, when both
// accept, on what they read).
func TestEvidenceDifferential(t *testing.T) {
	h := startNode(t)
	r := rand.New(rand.NewPCG(24, 24))
	n, bad := 0, 0
	for op, list := range seeds(t) {
		for i, s := range list {
			if i%7 != 0 { // a sample of the seeds: the corpus test runs them all
				continue
			}
			for k := 0; k < 3; k++ {
				m := s
				if k > 0 {
					if op == "gunzip" || op == "bundle" {
						m = mutateGzip(r, s)
					} else {
						m = mutate(r, s)
					}
				}
				n++
				if err := differ(t, h, op, m); err != nil {
					bad++
					if bad <= 20 {
						t.Error(err)
					}
				}
			}
		}
	}
	// More members than bundle.MaxFiles: refused by both, with one code.
	var many bytes.Buffer
	tw := tar.NewWriter(&many)
	for i := 0; i <= bundle.MaxFiles; i++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d/%05d", i), Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR})
	}
	tw.Close()
	if code, _ := goStrict("untar", many.Bytes()); code != bundle.ReasonFileSize {
		t.Errorf("a tar of %d members: %s, want %s", bundle.MaxFiles+1, code, bundle.ReasonFileSize)
	}
	if err := differ(t, h, "untar", many.Bytes()); err != nil {
		t.Error(err)
	}
	t.Logf("%d inputs, %d disagreements", n, bad)
}

// FuzzEvidenceReaders feeds random archives, tars and JSON to the Go
// reader and, through the Node harness, to the page's; any disagreement
// fails. Run it longer with
//
//	go test ./ui -run '^$' -fuzz FuzzEvidenceReaders -fuzztime 10m
func FuzzEvidenceReaders(f *testing.F) {
	ops := []string{"gunzip", "untar", "bundle", "json", "key", "logkey"}
	for op, list := range seeds(f) {
		for i, s := range list {
			if i%5 == 0 {
				f.Add(uint8(indexOf(ops, op)), s)
			}
		}
	}
	h := startNode(f)
	f.Fuzz(func(t *testing.T, op uint8, data []byte) {
		if err := differ(t, h, ops[int(op)%len(ops)], data); err != nil {
			t.Fatal(err)
		}
	})
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// gzipOf compresses data as one gzip member at a level from 0 (stored) to 9.
func gzipOf(data []byte, level int) []byte {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, level)
	if err != nil {
		panic(err)
	}
	zw.Write(data)
	zw.Close()
	return out.Bytes()
}

// retar rebuilds a ustar archive of members (names and data), the way
// the export writer lays it out, and compresses it.
func retar(ms []bundle.Member) []byte {
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, m := range ms {
		hdr := &tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data)), ModTime: time.Unix(m.Mtime, 0), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if m.Dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if tw.WriteHeader(hdr) != nil {
			return nil
		}
		if !m.Dir {
			tw.Write(m.Data)
		}
	}
	tw.Close()
	return gzipOf(out.Bytes(), 6)
}

// TestEvidenceDifferentialExport mutates one file inside valid corpus
// exports (the archive kept well-formed, so the JSON, signature, proof and
// cross-checks are reached) and requires the Go reader (bundle.CheckExport,
// the code of shredd verify) and the page to give the same verdict and
// reason code on each mutant.
func TestEvidenceDifferentialExport(t *testing.T) {
	h := startNode(t)
	r := rand.New(rand.NewPCG(24, 25))
	n, bad := 0, 0
	for _, c := range readEvidence(t) {
		if c.Verdict != "verified" {
			continue
		}
		if c.AttestationFile != nil {
			n, bad = mutateAttestation(t, h, r, c, n, bad)
			continue
		}
		tr, err := bundle.Gunzip(c.ExportFile)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := bundle.Untar(tr)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < *exportMutants; k++ {
			mut := slices.Clone(ms)
			i := r.IntN(len(mut))
			if mut[i].Dir {
				continue
			}
			mut[i].Data = mutate(r, mut[i].Data)
			m := c
			if m.ExportFile = retar(mut); m.ExportFile == nil {
				continue
			}
			opts := bundle.Options{Saved: m.SavedFile, WitnessKeys: m.WitnessFiles}
			if m.WitnessesRequired != nil {
				opts.WitnessesRequired = *m.WitnessesRequired
			}
			if m.Subject != nil {
				opts.Subject = *m.Subject
				opts.Salt, _ = hex.DecodeString(*m.Salt)
			}
			_, gerr := bundle.CheckExport(m.ExportFile, m.KeyFile, m.LogKeyFile, opts)
			a := h.ask(t, m.request())
			n++
			if bundle.Reason(gerr) != a.Code || (gerr == nil) != a.Verified {
				bad++
				if bad <= 20 {
					t.Errorf("%s with %s mutated: Go says %s (%v), the page %s (%s: %s)", c.Name, mut[i].Name, bundle.Reason(gerr), gerr, a.Code, a.Failed, a.Detail)
				}
			}
		}
	}
	t.Logf("%d mutants, %d disagreements", n, bad)
}

// mutateAttestation is TestEvidenceDifferentialExport on a valid bare
// attestation: mutants of the file, read by bundle.CheckAttestation (the
// code of shredd verify FILE.json) and by the page. It returns the counts
// of mutants and disagreements so far.
func mutateAttestation(t *testing.T, h *nodeHarness, r *rand.Rand, c evidenceCase, n, bad int) (int, int) {
	var subject string
	var salt []byte
	if c.Salt != nil {
		subject, salt = *c.Subject, must(hex.DecodeString(*c.Salt))
	}
	for range *exportMutants {
		m := c
		m.AttestationFile = mutate(r, c.AttestationFile)
		_, gerr := bundle.CheckAttestation(m.AttestationFile, m.KeyFile, subject, salt)
		a := h.ask(t, m.request())
		n++
		if bundle.Reason(gerr) != a.Code || (gerr == nil) != a.Verified {
			bad++
			if bad <= 20 {
				t.Errorf("%s mutated: Go says %s (%v), the page %s (%s: %s)", c.Name, bundle.Reason(gerr), gerr, a.Code, a.Failed, a.Detail)
			}
		}
	}
	return n, bad
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
