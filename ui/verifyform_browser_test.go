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

// verifyForm fills the page's verify form (the page opened from disk),
// submits it and waits for the verdict.
func verifyForm(t *testing.T, ctx context.Context, page, export string, c *evidenceCase, fill map[string]string) {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(strings.Replace(page, "#", fmt.Sprintf("?v=%d#", time.Now().UnixNano()), 1)),
		chromedp.WaitVisible(chromedp.ID("view-verify")),
		chromedp.SetUploadFiles(chromedp.ID("v-file"), []string{abs(t, export)}),
		chromedp.SetValue(chromedp.ID("v-key"), string(c.KeyFile)),
		chromedp.SetValue(chromedp.ID("v-logkey"), strings.TrimSpace(string(c.LogKeyFile)))}
	if c.Saved != nil {
		steps = append(steps, chromedp.SetUploadFiles(chromedp.ID("v-saved"), []string{abs(t, filepath.Join(evidenceDir, *c.Saved))}))
	}
	if c.Subject != nil && c.Salt != nil {
		steps = append(steps, chromedp.SetValue(chromedp.ID("v-subject"), *c.Subject), chromedp.SetValue(chromedp.ID("v-salt"), *c.Salt))
	}
	for id, v := range fill {
		if v == "" {
			continue // a fresh page's fields are empty
		}
		steps = append(steps, chromedp.SetValue(chromedp.ID(id), v))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)))
	run(t, ctx, steps...)
	waitFor(t, ctx, `document.getElementById('verdict').dataset.verified !== undefined`, 30*time.Second)
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
	var c *evidenceCase
	cases := readEvidence(t)
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
	writeFile(t, plain, c.ExportFile)
	a := readArchive(t, plain)

	// The export's checkpoint, cosigned by w1 and, wrongly, by w3; w2 never
	// cosigned it. Its proofs are against it byte for byte: they carry the
	// cosigned one too, as a witnessed log's would.
	cp := a.file("checkpoint")
	logKey, err := note.NewVerifier(strings.TrimSpace(string(c.LogKeyFile)))
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
		var vs []note.Verifier
		for _, k := range keys {
			v, err := translog.NewCosignatureVerifier(k)
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		opts := bundle.Options{Subject: *c.Subject, Witnesses: vs, WitnessesRequired: required}
		opts.Salt, _ = hex.DecodeString(*c.Salt)
		opts.Saved = c.SavedFile
		_, err := bundle.CheckExport(readFile(t, witnessed), c.KeyFile, c.LogKeyFile, opts)
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

	// Usage errors of the CLI are refusals of the form, before any check.
	for _, tc := range []struct{ keys, required, want string }{
		{"", "1", "needs the trusted witnesses' keys"},
		{vkeys[0], "2", "want 1 to the 1 witness keys given"},
		{vkeys[0] + "\n" + vkeys[0], "", "the same public key is given twice"},
		{"not a key", "", "witness key:"},
	} {
		verifyForm(t, ctx, page, witnessed, c, map[string]string{"v-witnesses": tc.keys, "v-witnesses-required": tc.required})
		if d := eval[string](t, ctx, `document.querySelector('#checks [data-check=keys]')?.textContent || ''`); !strings.Contains(d, tc.want) ||
			eval[string](t, ctx, `document.getElementById('verdict').dataset.verified`) != "false" {
			t.Errorf("witnesses %q, required %q: the page's keys check %q, want %q", tc.keys, tc.required, d, tc.want)
		}
	}
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
	dir := t.TempDir()
	seen := 0
	for _, c := range readEvidence(t) {
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		seen++
		export := filepath.Join(dir, c.Name+".tar.gz")
		writeFile(t, export, c.ExportFile)
		verifyForm(t, ctx, page, export, &c, nil)
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
	for _, c := range readEvidence(t) {
		if c.Reason != "ok" {
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
