package bundle_test

// The Go reader (CheckExport, CheckAttestation: the code of shredd verify)
// against the Python client's (clients/python, shredd.verify) on mutants of
// the shared corpus: every corpus case and a fixed-seed set of mutants of
// its valid cases go through both readers, which must give the same
// verdict and reason code. One python3 process (the Python client's
// tests/evidence_harness.py) answers every input, one JSON line each.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
)

// pyCase is a case of testdata/evidence/cases.json (every field the
// spec's R10 names), with its files read.
type pyCase struct {
	Name              string   `json:"name"`
	Export            *string  `json:"export"`
	Attestation       *string  `json:"attestation"`
	Key               *string  `json:"key"`
	LogKey            *string  `json:"log_key"`
	Saved             *string  `json:"saved"`
	Subject           *string  `json:"subject"`
	Salt              *string  `json:"salt"`
	Witnesses         []string `json:"witnesses"`
	WitnessesRequired *int     `json:"witnesses_required"`
	Verdict           string   `json:"verdict"`
	Reason            string   `json:"reason"`

	files map[string][]byte // the bytes of each file field ("export", "key", ...); witness i is "witness/i"
}

func readPyCases(t *testing.T) []*pyCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Cases []*pyCase }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) < 150 {
		t.Fatalf("%d cases in the corpus, want at least 150", len(m.Cases))
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range m.Cases {
		c.files = map[string][]byte{}
		for field, p := range map[string]*string{"export": c.Export, "attestation": c.Attestation, "key": c.Key, "log_key": c.LogKey, "saved": c.Saved} {
			if p != nil {
				c.files[field] = read(*p)
			}
		}
		for i, w := range c.Witnesses {
			c.files[fmt.Sprintf("witness/%d", i)] = read(w)
		}
	}
	return m.Cases
}

// clone returns c with its own map of files.
func (c *pyCase) clone() *pyCase {
	d := *c
	d.files = map[string][]byte{}
	for k, v := range c.files {
		d.files[k] = v
	}
	return &d
}

// goReason runs the Go reader on c: its verdict and reason code as the
// corpus spells them.
func (c *pyCase) goReason() (string, string) {
	// The usage errors shredd verify finds in its flags, which the
	// options of CheckExport and CheckAttestation cannot express.
	if (c.Subject == nil) != (c.Salt == nil) || c.WitnessesRequired != nil && *c.WitnessesRequired < 1 {
		return "usage", bundle.ReasonUsage
	}
	var salt []byte
	if c.Salt != nil {
		s, err := attest.ParseSalt(*c.Salt)
		if err != nil {
			return "usage", bundle.ReasonUsage
		}
		salt = s
	}
	subject := ""
	if c.Subject != nil {
		subject = *c.Subject
	}
	var err error
	if a, ok := c.files["attestation"]; ok {
		_, err = bundle.CheckAttestation(a, c.files["key"], subject, salt)
	} else {
		opts := bundle.Options{Saved: c.files["saved"], Subject: subject, Salt: salt}
		for i := range c.Witnesses {
			opts.WitnessKeys = append(opts.WitnessKeys, c.files[fmt.Sprintf("witness/%d", i)])
		}
		if c.WitnessesRequired != nil {
			opts.WitnessesRequired = *c.WitnessesRequired
		}
		_, err = bundle.CheckExport(c.files["export"], c.files["key"], c.files["log_key"], opts)
	}
	switch r := bundle.Reason(err); r {
	case bundle.ReasonOK:
		return "verified", r
	case bundle.ReasonUsage:
		return "usage", r
	default:
		return "refused", r
	}
}

// request is c as the Python harness reads it: its files inline.
func (c *pyCase) request() map[string]any {
	req := map[string]any{"subject": c.Subject, "salt": c.Salt, "witnesses_required": c.WitnessesRequired}
	for _, f := range []string{"export", "attestation", "key", "log_key", "saved"} {
		if b, ok := c.files[f]; ok {
			req[f] = base64.StdEncoding.EncodeToString(b)
		}
	}
	if c.Witnesses != nil {
		ws := []string{}
		for i := range c.Witnesses {
			ws = append(ws, base64.StdEncoding.EncodeToString(c.files[fmt.Sprintf("witness/%d", i)]))
		}
		req["witnesses"] = ws
	}
	return req
}

// pyHarness is the one python3 process running the Python reader.
type pyHarness struct {
	in  *bufio.Writer
	out *bufio.Reader
}

func startPython(t *testing.T) *pyHarness {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("the Go-Python differential test needs python3 with the cryptography package (Debian: python3-cryptography)")
	}
	cmd := exec.Command(py, "../clients/python/tests/evidence_harness.py")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
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
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &pyHarness{in: bufio.NewWriterSize(in, 1<<20), out: bufio.NewReaderSize(out, 1<<16)}
}

type pyAnswer struct {
	Verdict, Reason, Detail string
}

func (h *pyHarness) ask(t *testing.T, c *pyCase) pyAnswer {
	t.Helper()
	line, err := json.Marshal(c.request())
	if err != nil {
		t.Fatal(err)
	}
	h.in.Write(append(line, '\n'))
	if err := h.in.Flush(); err != nil {
		t.Fatalf("python harness: %v", err)
	}
	reply, err := h.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("python harness: %v (did it start? it needs python3 with the cryptography package)", err)
	}
	var a pyAnswer
	if err := json.Unmarshal(reply, &a); err != nil {
		t.Fatalf("python harness: %v: %s", err, reply)
	}
	return a
}

// The characters a mutant inserts: every code point of the spec's WS set
// and a sample of INVISIBLE (format, control, default-ignorable), and the
// bytes a line grammar trips on.
var pyInserts = func() [][]byte {
	var out [][]byte
	for _, r := range []rune{'\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
		0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, // WS
		0xFEFF, 0x200B, 0x200D, 0x2060, 0x00AD, 0x180E, 0x3164, 0x061C, 0xE0001, 0x1D173, 0, 0x1F, 0x7F} { // INVISIBLE only
		out = append(out, utf8.AppendRune(nil, r))
	}
	return append(out, []byte("+"), []byte("="), []byte("/"), []byte("— "), []byte("\n\n"), []byte("\xff"))
}()

// pyMutate returns a mutant of b: a bit flipped, a WS or INVISIBLE
// character inserted (at the start, the end, or anywhere), a line
// repeated, a byte deleted, or a line's LF made CR LF.
func pyMutate(r *rand.Rand, b []byte) []byte {
	out := bytes.Clone(b)
	at := func() int { return r.IntN(len(out) + 1) }
	switch k := r.IntN(8); {
	case k == 0 && len(out) > 0:
		i := r.IntN(len(out))
		out[i] ^= 1 << r.IntN(8)
	case k <= 3:
		v := pyInserts[r.IntN(len(pyInserts))]
		i := [...]int{0, len(out), at()}[r.IntN(3)]
		out = slices.Insert(out, i, v...)
	case k <= 5:
		lines := bytes.SplitAfter(out, []byte("\n"))
		i := r.IntN(len(lines))
		j := r.IntN(len(lines) + 1)
		out = bytes.Join(slices.Insert(slices.Clone(lines), j, lines[i]), nil)
	case k == 6 && len(out) > 0:
		i := r.IntN(len(out))
		out = slices.Delete(out, i, i+1)
	default:
		var lfs []int
		for i, c := range out {
			if c == '\n' {
				lfs = append(lfs, i)
			}
		}
		if len(lfs) > 0 {
			out = slices.Insert(out, lfs[r.IntN(len(lfs))], '\r')
		}
	}
	return out
}

// pyMember is a member of an export to write back.
type pyMember struct {
	name string
	dir  bool
	data []byte
}

// pyTar writes members as ustar, any name as it is (the prefix field
// holding what does not fit in the name's 100 bytes), and compresses
// them; nil when a name does not fit.
func pyTar(ms []pyMember) []byte {
	var t bytes.Buffer
	for _, m := range ms {
		h := make([]byte, 512)
		name, prefix := m.name, ""
		if len(name) > 100 {
			i := strings.LastIndex(name[:min(len(name), 156)], "/")
			if i < 0 || len(name)-i-1 > 100 {
				return nil
			}
			name, prefix = name[i+1:], name[:i]
		}
		copy(h, name)
		copy(h[345:], prefix)
		typ, size := byte('0'), len(m.data)
		if m.dir {
			typ, size = '5', 0
		}
		copy(h[100:], "0000644\x00")
		copy(h[108:], "0000000\x00")
		copy(h[116:], "0000000\x00")
		copy(h[124:], fmt.Sprintf("%011o\x00", size))
		copy(h[136:], fmt.Sprintf("%011o\x00", 0))
		copy(h[148:], "        ")
		h[156] = typ
		copy(h[257:], "ustar\x0000")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
		t.Write(h)
		if !m.dir {
			t.Write(m.data)
			t.Write(make([]byte, (512-size%512)%512))
		}
	}
	t.Write(make([]byte, 1024))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(t.Bytes())
	zw.Close()
	return z.Bytes()
}

// pyMutatePath changes a member's path, or adds a directory: a final
// "/", a "//", a "." segment, a WS character, the directory in both its
// spellings.
func pyMutatePath(r *rand.Rand, ms []pyMember) []pyMember {
	ms = slices.Clone(ms)
	i := r.IntN(len(ms))
	m := &ms[i]
	dir, base, _ := strings.Cut(m.name, "/")
	switch r.IntN(6) {
	case 0:
		m.name += "/"
	case 1:
		m.name = dir + "//" + base
	case 2:
		m.name = dir + "/./" + base
	case 3:
		m.name = dir + "/" + base + string(pyInserts[r.IntN(len(pyInserts))])
	case 4:
		ms = append([]pyMember{{name: dir + "/", dir: true}, {name: dir, dir: true}}[r.IntN(2):], ms...)
	default:
		ms = append([]pyMember{{name: dir, dir: true}}, ms...)
		ms = append(ms, pyMember{name: dir + "/", dir: true})
	}
	return ms
}

// pyMembers reads an export's members.
func pyMembers(t *testing.T, export []byte) []pyMember {
	t.Helper()
	tr, err := bundle.Gunzip(export)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := bundle.Untar(tr)
	if err != nil {
		t.Fatal(err)
	}
	var out []pyMember
	for _, m := range ms {
		out = append(out, pyMember{name: m.Name, dir: m.Dir, data: m.Data})
	}
	return out
}

// TestPythonDifferential runs every corpus case, and mutants of each
// valid one (a key file, the saved checkpoint, a witness key, the bare
// attestation, or a member of the export or its path), through the Go
// reader and the Python reader; any disagreement in verdict or reason
// code fails. Fixed seed, bounded: a few seconds.
func TestPythonDifferential(t *testing.T) {
	h := startPython(t)
	cases := readPyCases(t)
	n, bad := 0, 0
	reasons := map[string]int{}
	check := func(c *pyCase, what string) {
		n++
		gv, gr := c.goReason()
		reasons[gr]++
		a := h.ask(t, c)
		if a.Verdict != gv || a.Reason != gr {
			bad++
			if bad <= 25 {
				t.Errorf("%s: Go says %s %s, Python %s %s %s", what, gv, gr, a.Verdict, a.Reason, a.Detail)
			}
		}
	}
	for _, c := range cases {
		check(c, c.Name)
	}
	r := rand.New(rand.NewPCG(47, 3))
	const mutants = 30
	for _, c := range cases {
		if c.Verdict != "verified" {
			continue
		}
		var members []pyMember
		if ex, ok := c.files["export"]; ok {
			members = pyMembers(t, ex)
		}
		var fields []string
		for f := range c.files {
			if f != "export" {
				fields = append(fields, f)
			}
		}
		slices.Sort(fields)
		for k := 0; k < mutants; k++ {
			m := c.clone()
			var what string
			switch {
			case members != nil && k%3 != 0:
				ms := slices.Clone(members)
				if k%7 == 1 {
					ms = pyMutatePath(r, ms)
					what = "a path"
				} else {
					i := r.IntN(len(ms))
					old := ms[i].data
					ms[i].data = pyMutate(r, old)
					what = ms[i].name
					if strings.HasSuffix(ms[i].name, "/checkpoint") && r.IntN(2) == 0 {
						// The same checkpoint at the end of every proof: the
						// mutant gets past proof.checkpoint.
						for j := range ms {
							if p, ok := bytes.CutSuffix(ms[j].data, old); ok && strings.HasSuffix(ms[j].name, ".tlog-proof") {
								ms[j].data = append(slices.Clip(p), ms[i].data...)
							}
						}
						what += " and its copies in the proofs"
					}
				}
				if m.files["export"] = pyTar(ms); m.files["export"] == nil {
					continue
				}
			default:
				f := fields[r.IntN(len(fields))]
				m.files[f] = pyMutate(r, m.files[f])
				what = f
			}
			check(m, fmt.Sprintf("%s with %s mutated (mutant %d)", c.Name, what, k))
		}
	}
	t.Logf("%d inputs (the corpus and its mutants), %d disagreements; Go's reason codes: %v", n, bad, reasons)
	if len(reasons) < 30 {
		t.Errorf("the inputs reach %d reason codes: the mutants no longer reach the reader's checks", len(reasons))
	}
}
