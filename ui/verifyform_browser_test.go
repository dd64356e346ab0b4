package ui_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/translog"
)

// verifyForm fills the page's verify form (the page opened from disk) as
// a person does, from a corpus case with export in place of its own: its
// files chosen through the form's file inputs, the witnesses' keys and
// their count pasted into their fields (fill: "v-witnesses",
// "v-witnesses-required"); presses Verify and waits for the verdict.
func verifyForm(t *testing.T, ctx context.Context, page, export string, c *corpusCase, fill map[string]string) shown {
	t.Helper()
	f := fromCase(t, c)
	f.file = export
	if v := fill["v-witnesses"]; v != "" {
		f.witnesses = &v
	}
	if v := fill["v-witnesses-required"]; v != "" {
		f.required = &v
	}
	return submit(t, ctx, page, f)
}

// TestVerifyFormWitnesses checks an export whose checkpoint carries
// witness cosignatures through the page's verify form in Chromium, opened
// from disk, with the witnesses' keys and a required count typed in the
// form, as `shredd verify --witness KEY... --witnesses-required K`
// (bundle.CheckExport) checks it: 1 of 1 verifies; 2 of the three given,
// of which one cosigned, one did not and one cosignature is invalid, is
// NOT VERIFIED with reason checkpoint.witnesses and its section (§13), and
// the page names each witness as cosigned, missing or invalid.
func TestVerifyFormWitnesses(t *testing.T) {
	var c *corpusCase
	cases := readCorpus(t)
	for i := range cases {
		if cases[i].Name == "001-valid" {
			c = &cases[i]
		}
	}
	if c == nil {
		t.Fatal("no case 001-valid in the corpus")
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.tar.gz")
	writeFile(t, plain, readFile(t, corpusPath(t, c.Export)))
	keyFile, logKeyFile, savedFile := readFile(t, corpusPath(t, c.Key)), readFile(t, corpusPath(t, c.LogKey)), readFile(t, corpusPath(t, c.Saved))
	a := readArchive(t, plain)

	// The export's checkpoint, cosigned by w1 and, wrongly, by w3; w2 never
	// cosigned it. Its proofs are against it byte for byte: they carry the
	// cosigned one too, as a witnessed log's would.
	cp := a.file("checkpoint")
	logKey, err := note.NewVerifier(strings.TrimSuffix(string(logKeyFile), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cp, note.VerifierList(logKey))
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(1767225600, 0)
	var vkeys []string
	cosigned := bytes.Clone(cp)
	for i := range 3 {
		sk, vk, err := translog.GenerateCosignerKey(fmt.Sprintf("w%d.example/witness", i+1))
		if err != nil {
			t.Fatal(err)
		}
		cs, err := translog.NewCosigner(sk, func() time.Time { return when })
		if err != nil {
			t.Fatal(err)
		}
		b, err := note.Sign(&note.Note{Text: n.Text}, cs)
		if err != nil {
			t.Fatal(err)
		}
		line := string(b[len(n.Text)+1:])
		switch i {
		case 1:
			line = "" // w2: no cosignature
		case 2: // w3: a cosignature that does not verify
			name, sig64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(line, "— "), "\n"), " ")
			sig, _ := base64.StdEncoding.DecodeString(sig64)
			sig[20] ^= 1
			line = "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
		}
		cosigned = append(cosigned, line...)
		vkeys = append(vkeys, vk)
	}
	replaced := 0
	for i := range a.files {
		replaced += bytes.Count(a.files[i].data, cp)
		a.files[i].data = bytes.ReplaceAll(a.files[i].data, cp, cosigned)
	}
	if replaced < 3 {
		t.Fatalf("the checkpoint was found %d times in the export", replaced)
	}
	witnessed := a.write(t, filepath.Join(dir, "witnessed.tar.gz"))

	// What shredd verify says (bundle.CheckExport with the same options).
	goVerify := func(keys []string, required int) (string, string) {
		t.Helper()
		var ks [][]byte
		for _, k := range keys {
			ks = append(ks, []byte(k))
		}
		opts := bundle.Options{Subject: *c.Subject, WitnessKeys: ks, WitnessesRequired: required}
		opts.Salt, _ = hex.DecodeString(*c.Salt)
		opts.Saved = savedFile
		_, err := bundle.CheckExport(readFile(t, witnessed), keyFile, logKeyFile, opts)
		if err == nil {
			return "ok", ""
		}
		return bundle.Reason(err), err.Error()
	}

	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	statuses := func() map[string]string {
		return eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#witnesses li[data-witness]')].map(l => [l.dataset.witness, l.dataset.status]))`)
	}
	for _, tc := range []struct {
		name     string
		keys     []string
		required string
		code     string
		status   map[string]string
	}{
		{"1 of 1", vkeys[:1], "1", "ok", map[string]string{"w1.example/witness": "cosigned"}},
		{"no witnesses given", nil, "", "ok", map[string]string{}},
		{"2 of 3 required, 1 valid", vkeys, "2", "checkpoint.witnesses",
			map[string]string{"w1.example/witness": "cosigned", "w2.example/witness": "missing", "w3.example/witness": "invalid"}},
		{"all of 2 required (empty count), 1 valid", vkeys[:2], "", "checkpoint.witnesses",
			map[string]string{"w1.example/witness": "cosigned", "w2.example/witness": "missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			required := len(tc.keys)
			if tc.required != "" {
				fmt.Sscan(tc.required, &required)
			}
			goCode, goErr := goVerify(tc.keys, required)
			if goCode != tc.code {
				t.Fatalf("shredd verify says %s (%s), want %s", goCode, goErr, tc.code)
			}
			verifyForm(t, ctx, page, witnessed, c, map[string]string{"v-witnesses": strings.Join(tc.keys, "\n"), "v-witnesses-required": tc.required})
			verdict := eval[string](t, ctx, `document.getElementById('verdict').textContent`)
			if got := eval[string](t, ctx, `document.getElementById('verdict').dataset.verified`); got != fmt.Sprint(tc.code == "ok") {
				t.Fatalf("the page says %q", verdict)
			}
			if got := statuses(); !maps.Equal(got, tc.status) {
				t.Errorf("the page lists the witnesses %v, want %v", got, tc.status)
			}
			if tc.code == "ok" {
				if len(tc.keys) > 0 && !strings.Contains(eval[string](t, ctx, `document.querySelector('#checks [data-check=witnesses]').textContent`), "1 of 1 required cosignatures valid: w1.example/witness (2026-01-01T00:00:00Z)") {
					t.Errorf("no witnesses check line: %q", eval[string](t, ctx, `document.getElementById('checks').textContent`))
				}
				if len(tc.keys) == 0 && !eval[bool](t, ctx, `document.getElementById('witnesses').hidden`) {
					t.Error("the witness list is shown with no witness given")
				}
				return
			}
			want := "[checkpoint.witnesses, docs/transparency.md §13]"
			if !strings.Contains(verdict, want) {
				t.Errorf("the verdict %q does not show %s", verdict, want)
			}
			// The page's reason is Go's (translog.CheckCosignatures).
			reason := eval[string](t, ctx, `document.querySelector('#checks [data-check=witnesses] .detail').textContent`)
			if r := strings.TrimPrefix(reason, "checkpoint: "); r == reason || !strings.Contains(goErr, r) {
				t.Errorf("the page's reason %q is not shredd verify's %q", reason, goErr)
			}
		})
	}

	// On a phone the witnesses' list fits: nothing scrolls sideways.
	phone := tab(t, 390, 844)
	verifyForm(t, phone, page, witnessed, c, map[string]string{"v-witnesses": strings.Join(vkeys, "\n"), "v-witnesses-required": "2"})
	if eval[int](t, phone, `document.querySelectorAll('#witnesses li[data-witness]').length`) != 3 {
		t.Error("the phone's verdict lists no witnesses")
	}
	noSidewaysScroll(t, phone, "the witnesses of a refused export")
	run(t, phone, chromedp.ScrollIntoView(chromedp.ID("verdict")))
	artefact(t, phone, "page-phone-verify-witnesses")

	// The keys and count that cannot be used (a malformed key, one key
	// twice, a count that does not fit): TestFormWitnessField.
}

// TestVerifyFormReasonSection submits tampered exports of the corpus to
// the page's verify form in Chromium (opened from disk) and requires the
// verdict to show the corpus's reason code with the section of
// docs/transparency.md that defines it.
func TestVerifyFormReasonSection(t *testing.T) {
	want := map[string]string{
		"038-gzip-bad-crc":            "[gzip.crc, docs/transparency.md §10a.2]",
		"047-tar-pax-path":            "[tar.pax, docs/transparency.md §10a.3]",
		"230-checkpoint-other-origin": "[checkpoint.origin, docs/transparency.md §10a.8]",
	}
	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	seen := 0
	for _, c := range readCorpus(t) {
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		seen++
		verifyForm(t, ctx, page, corpusPath(t, c.Export), &c, nil)
		verdict := eval[string](t, ctx, `document.getElementById('verdict').textContent`)
		if !strings.HasPrefix(verdict, "NOT VERIFIED") || !strings.HasSuffix(verdict, w) {
			t.Errorf("%s: the page says %q, want it to end in %s", c.Name, verdict, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of the %d cases found in the corpus", seen, len(want))
	}
	// Every reason code of the corpus has its section; a check's name (no
	// code of the spec) has none.
	codes := map[string]bool{}
	for _, c := range readCorpus(t) {
		if c.Reason != "ok" && c.Reason != "usage" {
			codes[c.Reason] = true
		}
	}
	list := append(slices.Sorted(maps.Keys(codes)), "checkpoint.witnesses")
	js, _ := json.Marshal(list)
	sections := eval[[]string](t, ctx, string(js)+`.map(ShreddVerify.sectionOf)`)
	for i, code := range list {
		if !strings.HasPrefix(sections[i], "docs/transparency.md §") {
			t.Errorf("reason code %s has no section: %q", code, sections[i])
		}
	}
	if s := eval[string](t, ctx, `ShreddVerify.sectionOf('keys')`); s != "" {
		t.Errorf("the check name keys has section %q", s)
	}
}
