package ui_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/translog"
)

// TestWitnessJSAgreesWithGo runs the page's cosignature check
// (ShreddWitness, set by static/verify.js, generated from
// clients/typescript/src/evidence.ts) in Chromium, from a file:// page,
// on cosigned checkpoints made in Go, and requires the verdict and the
// witnesses found valid, missing and invalid of translog.CheckCosignatures
// on every case but those the spec's byte rules settle otherwise
// (docs/transparency.md §10a.8, §13.1): two lines of one key are
// checkpoint.format, one key given twice is witness.duplicate.
func TestWitnessJSAgreesWithGo(t *testing.T) {
	skey, vkey, _ := translog.GenerateKey("shredd/witness-js")
	signer, _ := note.NewSigner(skey)
	logKey, _ := note.NewVerifier(vkey)
	c := translog.Checkpoint{Origin: "shredd/witness-js", Size: 7, Hash: tlog.Hash(sha256.Sum256([]byte("root")))}
	signed, err := note.Sign(&note.Note{Text: c.String()}, signer)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(1767225600, 0)
	var vkeys, lines, otherLines, lastLines []string
	other := c
	other.Hash[0] ^= 1
	for i := range 3 {
		sk, vk, err := translog.GenerateCosignerKey(fmt.Sprintf("w%d.example/witness", i+1))
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := translog.NewCosigner(sk, func() time.Time { return when })
		b, _ := note.Sign(&note.Note{Text: c.String()}, cs)
		// The last second a cosignature can hold, 2^63-1.
		last, _ := translog.NewCosigner(sk, func() time.Time { return time.Unix(math.MaxInt64, 0) })
		lb, _ := note.Sign(&note.Note{Text: c.String()}, last)
		lastLines = append(lastLines, string(lb[len(c.String())+1:]))
		ob, _ := note.Sign(&note.Note{Text: other.String()}, cs)
		vkeys, lines = append(vkeys, vk), append(lines, string(b[len(c.String())+1:]))
		otherLines = append(otherLines, string(ob[len(other.String())+1:]))
	}
	tampered := func(line string) string {
		name, b64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(line, "— "), "\n"), " ")
		sig, _ := base64.StdEncoding.DecodeString(b64)
		sig[30] ^= 1
		return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	}
	base := string(signed)
	cases := []struct {
		name     string
		note     string
		keys     []string
		required int
		refuse   string // the page's reason code, where the spec and translog part
	}{
		{"2 of 3, 2 required", base + lines[0] + lines[1], vkeys, 2, ""},
		{"2 of 3, all required", base + lines[0] + lines[1], vkeys, 3, ""},
		{"3 of 3", base + lines[0] + lines[1] + lines[2], vkeys, 3, ""},
		{"none", base, vkeys, 1, ""},
		{"an invalid one", base + lines[0] + tampered(lines[1]), vkeys, 2, ""},
		{"invalid then valid line of one witness", base + tampered(lines[0]) + lines[0], vkeys[:1], 1, "checkpoint.format"},
		{"valid then invalid line of one witness", base + lines[0] + tampered(lines[0]), vkeys[:1], 1, "checkpoint.format"},
		{"one key twice", base + lines[0], []string{vkeys[0], vkeys[0]}, 1, "witness.duplicate"},
		{"a timestamp of 2^63-1", base + lastLines[0], vkeys[:1], 1, ""},
		{"a line of another key whose name holds U+FEFF", base + "— w\uFEFFx.example/witness AAAAAAA=\n" + lines[0], vkeys[:1], 1, ""},
		{"unknown witness lines ignored", base + lines[2], vkeys[:2], 1, ""},
		{"a cosignature of another root", base + lines[0] + otherLines[1], vkeys[:2], 2, ""},
	}
	dir := t.TempDir()
	js, err := os.ReadFile(filepath.Join("static", "verify.js"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "verify.js"), js)
	writeFile(t, filepath.Join(dir, "page.html"), []byte(`<!doctype html><meta charset="utf-8"><title>witness</title><script src="verify.js"></script>`))
	ctx := tab(t, 1280, 800)
	run(t, ctx, chromedp.Navigate("file://"+filepath.Join(dir, "page.html")))
	waitFor(t, ctx, `typeof window.ShreddWitness === 'object'`, 10*time.Second)

	type jsResult struct {
		OK    bool `json:"ok"`
		Valid []struct {
			Witness string `json:"witness"`
			Time    string `json:"time"`
		} `json:"valid"`
		Missing []string `json:"missing"`
		Invalid []string `json:"invalid"`
		Reason  string   `json:"reason"`
		Error   string   `json:"error"`
		Code    string   `json:"code"`
	}
	check := func(noteText string, keys []string, required int) jsResult {
		t.Helper()
		args, _ := json.Marshal([]any{noteText, keys, required})
		eval[bool](t, ctx, `window.__r = undefined; ShreddWitness.checkCosignatures(...`+string(args)+`).then(
			(r) => { window.__r = JSON.stringify(r); }, (e) => { window.__r = JSON.stringify({error: String(e.message), code: String(e.code)}); }); true`)
		waitFor(t, ctx, `window.__r !== undefined`, 10*time.Second)
		var r jsResult
		if err := json.Unmarshal([]byte(eval[string](t, ctx, `window.__r`)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range cases {
		if tc.refuse != "" {
			if r := check(tc.note, tc.keys, tc.required); r.Code != tc.refuse {
				t.Errorf("%s: the page says %+v, want the refusal %s", tc.name, r, tc.refuse)
			}
			continue
		}
		var vs []note.Verifier
		for _, k := range tc.keys {
			v, err := translog.NewCosignatureVerifier(k)
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		_, rep, goErr := translog.CheckCosignatures([]byte(tc.note), logKey, vs, tc.required)
		if goErr != nil && !errors.Is(goErr, translog.ErrWitness) {
			t.Fatalf("%s: Go: %v", tc.name, goErr)
		}
		r := check(tc.note, tc.keys, tc.required)
		if r.Error != "" {
			t.Fatalf("%s: the page threw %s", tc.name, r.Error)
		}
		var jsValid, goValid []string
		for _, v := range r.Valid {
			jsValid = append(jsValid, v.Witness)
			if strings.Contains(tc.note, lastLines[0]) {
				if v.Time != "time 9223372036854775807" {
					t.Errorf("%s: the page's time %s", tc.name, v.Time)
				}
			} else if v.Time != "2026-01-01T00:00:00Z" {
				t.Errorf("%s: the page's time %s", tc.name, v.Time)
			}
		}
		for _, v := range rep.Valid {
			goValid = append(goValid, v.Witness)
		}
		if r.OK != (goErr == nil) || !slices.Equal(jsValid, goValid) || !slices.Equal(r.Missing, rep.Missing) || !slices.Equal(r.Invalid, rep.Invalid) {
			t.Errorf("%s: the page says ok=%v valid %v missing %v invalid %v (%s); Go says %v, valid %v missing %v invalid %v",
				tc.name, r.OK, jsValid, r.Missing, r.Invalid, r.Reason, goErr, goValid, rep.Missing, rep.Invalid)
		}
		if !r.OK && !strings.Contains(goErr.Error(), r.Reason) {
			t.Errorf("%s: the page's reason %q is not Go's %q", tc.name, r.Reason, goErr)
		}
	}
	// Keys it must refuse, as translog.NewCosignatureVerifier does.
	parts := strings.SplitN(vkeys[0], "+", 3)
	for _, bad := range []string{vkey, "w9.example/witness+" + parts[1] + "+" + parts[2], "not a key"} {
		if _, err := translog.NewCosignatureVerifier(bad); err == nil {
			t.Fatalf("Go accepts witness key %q", bad)
		}
		if r := check(base+lines[0], []string{bad}, 1); r.Code != "witness.format" {
			t.Errorf("the page on key %q: %+v", bad, r)
		}
	}
}
