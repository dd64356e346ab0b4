package ui_test

// The verify form as a person uses it, in Chromium, the page opened from
// disk: files are chosen through the form's file inputs (what
// DOM.setFileInputFiles does is what the file picker does), keys and the
// subject are pasted into the fields (Input.insertText, as a paste or an
// input method inserts text), the Verify button is pressed, and the verdict
// and reason code are read from what the page shows. The rule it holds the
// page to is the page's rule of docs/transparency.md ("the page's fields"):
// a chosen file's bytes go to the reader unchanged, a pasted key gets one
// LF appended when it has none, the witness field is split at LF only.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// corpusCase is a case of testdata/evidence/cases.json with every field
// the corpus may hold, read here as the manifest spells it, so that the
// form sees each new kind of case (bare attestations, witnesses, usage
// errors) as the corpus grows.
type corpusCase struct {
	Name              string   `json:"name"`
	About             string   `json:"about"`
	Export            *string  `json:"export"`
	Attestation       *string  `json:"attestation"`
	Key               *string  `json:"key"`
	LogKey            *string  `json:"log_key"`
	Subject           *string  `json:"subject"`
	Salt              *string  `json:"salt"`
	Saved             *string  `json:"saved"`
	Witnesses         []string `json:"witnesses"`
	WitnessesRequired *int     `json:"witnesses_required"`
	Verdict           string   `json:"verdict"`
	Reason            string   `json:"reason"`
}

func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	b := readFile(t, filepath.Join(evidenceDir, "cases.json"))
	var m struct{ Cases []corpusCase }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) < 150 {
		t.Fatalf("%d cases in the corpus, want at least 150", len(m.Cases))
	}
	return m.Cases
}

// corpusPath is the absolute path of a file of the corpus ("" for none).
func corpusPath(t *testing.T, name *string) string {
	if name == nil {
		return ""
	}
	return abs(t, filepath.Join(evidenceDir, *name))
}

// form is what a person gives the verify form: files chosen with its
// pickers (paths, "" for none) and text pasted into its fields (nil for an
// untouched field).
type form struct {
	file                     string // the export or the attestation
	keyFile, logKeyFile      string
	saved                    string
	key, logKey              *string
	witnesses, required      *string
	subject, salt            *string
	editKey, editLogKey      *string // pasted over the field after its file was chosen
	wantKeyShown, wantLogKey *string // what the key fields show once their files are chosen
}

// fromCase fills the form from a corpus case: every file through its
// picker, the witness key files pasted into the witness field one a line,
// the count, the subject and the salt pasted into theirs.
func fromCase(t *testing.T, c *corpusCase) form {
	f := form{file: corpusPath(t, c.Export), keyFile: corpusPath(t, c.Key), logKeyFile: corpusPath(t, c.LogKey), saved: corpusPath(t, c.Saved),
		subject: c.Subject, salt: c.Salt}
	if c.Attestation != nil {
		f.file = corpusPath(t, c.Attestation)
	}
	if len(c.Witnesses) > 0 {
		var w []byte
		for _, name := range c.Witnesses {
			b := readFile(t, filepath.Join(evidenceDir, name))
			w = append(w, b...)
			if !bytes.HasSuffix(b, []byte("\n")) {
				w = append(w, '\n')
			}
		}
		s := string(w)
		f.witnesses = &s
	}
	if c.WitnessesRequired != nil {
		s := fmt.Sprint(*c.WitnessesRequired)
		f.required = &s
	}
	return f
}

// shown is what the page shows once the Verify button was pressed.
type shown struct {
	Verified string // "true" or "false"
	Code     string // the reason code shown ("ok" when verified)
	Failed   string // the failed check
	Text     string // the verdict's text
}

// paste inserts text into the field with the focus, as a paste does.
func paste(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return err
	})
}

// selectAll selects the text of a field, as a person does before pasting
// over it.
func selectAll(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(document.getElementById('`+id+`').select(), true)`)(ctx, t)
		return err
	})
}

// submit opens a fresh copy of the page, fills the form as f says, presses
// Verify and reads the verdict. The verifier may refuse or verify, never
// throw: a fault of its own fails the test.
func submit(t *testing.T, ctx context.Context, page string, f form) shown {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(strings.Replace(page, "#", fmt.Sprintf("?v=%d#", time.Now().UnixNano()), 1)),
		chromedp.WaitVisible(chromedp.ID("view-verify"))}
	choose := func(id, path string) {
		if path != "" {
			steps = append(steps, chromedp.SetUploadFiles(chromedp.ID(id), []string{path}))
		}
	}
	type_ := func(id string, text *string) {
		if text != nil {
			steps = append(steps, chromedp.Focus(chromedp.ID(id)), paste(*text))
		}
	}
	choose("v-file", f.file)
	choose("v-key-file", f.keyFile)
	choose("v-logkey-file", f.logKeyFile)
	choose("v-saved", f.saved)
	run(t, ctx, steps...)
	steps = nil
	// The chosen key files are shown in their fields, as text.
	for _, w := range []struct {
		id   string
		want *string
	}{{"v-key", f.wantKeyShown}, {"v-logkey", f.wantLogKey}} {
		if w.want != nil {
			js, _ := json.Marshal(*w.want)
			waitFor(t, ctx, `document.getElementById('`+w.id+`').value === `+string(js), 10*time.Second)
		}
	}
	if f.editKey != nil {
		steps = append(steps, chromedp.Focus(chromedp.ID("v-key")), selectAll("v-key"), paste(*f.editKey))
	}
	if f.editLogKey != nil {
		steps = append(steps, chromedp.Focus(chromedp.ID("v-logkey")), selectAll("v-logkey"), paste(*f.editLogKey))
	}
	type_("v-key", f.key)
	type_("v-logkey", f.logKey)
	type_("v-witnesses", f.witnesses)
	type_("v-witnesses-required", f.required)
	type_("v-subject", f.subject)
	type_("v-salt", f.salt)
	steps = append(steps, chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)))
	run(t, ctx, steps...)
	waitFor(t, ctx, `document.getElementById('verdict').dataset.verified !== undefined`, 60*time.Second)
	s := eval[shown](t, ctx, `(() => { const v = document.getElementById('verdict'), c = v.querySelector('.reason-code');
		return { Verified: v.dataset.verified, Code: v.dataset.verified === 'true' ? 'ok' : c ? c.dataset.code : '', Failed: v.dataset.failed, Text: v.textContent }; })()`)
	if s.Failed == "verifier" {
		t.Errorf("the page's verifier threw: %s", s.Text)
	}
	return s
}

// verdictOf is the corpus's verdict of what the page shows.
func (s shown) verdict() string {
	switch {
	case s.Verified == "true":
		return "verified"
	case s.Code == "usage":
		return "usage"
	}
	return "refused"
}

// formRefused are refused cases of the corpus run through the form: the
// key files, the log key files, the archive, the subject and the saved
// checkpoint each refused with the corpus's code.
var formRefused = []string{
	"038-gzip-bad-crc", "121-key-trailing", "125-key-bom", "127-key-no-final-newline", "131-key-not-utf8",
	"133-logkey-trailing", "134-logkey-bom", "135-logkey-crlf", "213-subject-other", "230-checkpoint-other-origin", "269-saved-other-key",
}

// TestFormCorpus verifies every valid case of the shared corpus through
// the form's file inputs (each VERIFIED), a handful of refused ones (each
// NOT VERIFIED with the corpus's reason code shown), and every usage case
// (NOT CHECKED, [usage]).
func TestFormCorpus(t *testing.T) {
	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	checkRequests := watchRequests(ctx)
	refused := map[string]bool{}
	for _, n := range formRefused {
		refused[n] = true
	}
	valid := 0
	for _, c := range readCorpus(t) {
		if c.Verdict == "verified" {
			valid++
		} else if c.Verdict != "usage" && !refused[c.Name] {
			continue
		}
		delete(refused, c.Name)
		t.Run(c.Name, func(t *testing.T) {
			got := submit(t, ctx, page, fromCase(t, &c))
			if got.verdict() != c.Verdict || got.Code != c.Reason {
				t.Errorf("%s (%s): the page shows %s %s: %q; want %s %s", c.Name, c.About, got.verdict(), got.Code, got.Text, c.Verdict, c.Reason)
			}
			if c.Verdict == "refused" && (!strings.HasPrefix(got.Text, "NOT VERIFIED") || !strings.Contains(got.Text, "["+c.Reason+", docs/transparency.md §")) {
				t.Errorf("%s: the verdict %q does not show the reason code and its section", c.Name, got.Text)
			}
		})
	}
	if valid < 20 || len(refused) > 0 {
		t.Fatalf("%d valid cases in the corpus; refused cases not found: %v", valid, refused)
	}
	checkRequests(t)
}

// TestFormKeysPastedAndChosen: the attestation key and the log key pasted
// with and without their final LF, chosen as files, and chosen then
// edited, on the corpus's valid export 001-valid.
func TestFormKeysPastedAndChosen(t *testing.T) {
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
	key := string(readFile(t, filepath.Join(evidenceDir, *c.Key)))
	logKey := string(readFile(t, filepath.Join(evidenceDir, *c.LogKey)))
	if !strings.HasSuffix(key, "\n") || !strings.HasSuffix(logKey, "\n") {
		t.Fatal("the corpus's key files do not end in LF")
	}
	keyNoLF, logKeyNoLF := strings.TrimSuffix(key, "\n"), strings.TrimSuffix(logKey, "\n")
	dir := t.TempDir()
	noLF := filepath.Join(dir, "key-no-final-newline.pem")
	if err := os.WriteFile(noLF, []byte(keyNoLF), 0o644); err != nil {
		t.Fatal(err)
	}
	p := func(s string) *string { return &s }
	base := fromCase(t, c)
	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	for _, tc := range []struct {
		name string
		edit func(f *form)
		code string
	}{
		{"key pasted with its final LF", func(f *form) { f.keyFile, f.key = "", p(key) }, "ok"},
		{"key pasted without its final LF", func(f *form) { f.keyFile, f.key = "", p(keyNoLF) }, "ok"},
		{"key file without its final LF chosen", func(f *form) { f.keyFile, f.wantKeyShown = noLF, p(keyNoLF) }, "key.format"},
		{"key file without its final LF chosen, then pasted over", func(f *form) { f.keyFile, f.editKey = noLF, p(keyNoLF) }, "ok"},
		{"key file chosen, shown as its text", func(f *form) { f.wantKeyShown = p(key) }, "ok"},
		{"key pasted with a BOM", func(f *form) { f.keyFile, f.key = "", p("\ufeff"+key) }, "text.bom"},
		{"key pasted with a trailing space", func(f *form) { f.keyFile, f.key = "", p(key+" ") }, "key.trailing"},
		{"log key pasted with its final LF", func(f *form) { f.logKeyFile, f.logKey = "", p(logKey) }, "ok"},
		{"log key pasted without its final LF", func(f *form) { f.logKeyFile, f.logKey = "", p(logKeyNoLF) }, "ok"},
		{"log key pasted with a trailing NBSP", func(f *form) { f.logKeyFile, f.logKey = "", p(logKeyNoLF+"\u00a0") }, "logkey.format"},
		{"log key pasted with a leading U+3000", func(f *form) { f.logKeyFile, f.logKey = "", p("\u3000"+logKey) }, "logkey.format"},
		{"log key pasted with a second LF", func(f *form) { f.logKeyFile, f.logKey = "", p(logKey+"\n") }, "logkey.format"},
		{"log key file chosen, then pasted over with a trailing NBSP", func(f *form) { f.editLogKey, f.wantLogKey = p(logKeyNoLF+"\u00a0"), p(logKey) }, "logkey.format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			got := submit(t, ctx, page, f)
			if got.Code != tc.code {
				t.Errorf("the page shows %s: %q; want %s", got.Code, got.Text, tc.code)
			}
		})
	}
}

// TestFormUsage: inputs the verifier cannot be asked about are shown as
// NOT CHECKED with the reason code usage, never as a verdict or a fault:
// no file chosen, a malformed salt, a subject without its salt.
func TestFormUsage(t *testing.T) {
	var c *corpusCase
	cases := readCorpus(t)
	for i := range cases {
		if cases[i].Name == "001-valid" {
			c = &cases[i]
		}
	}
	p := func(s string) *string { return &s }
	base := fromCase(t, c)
	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	for _, tc := range []struct {
		name string
		edit func(f *form)
	}{
		{"no file chosen", func(f *form) { f.file = "" }},
		{"a salt with a space", func(f *form) { f.salt = p(*f.salt + " ") }},
		{"a salt with a final LF", func(f *form) { f.salt = p(*f.salt + "\n") }},
		{"a salt of 63 digits", func(f *form) { f.salt = p((*f.salt)[1:]) }},
		{"a salt with 0x", func(f *form) { f.salt = p("0x" + *f.salt) }},
		{"a subject without its salt", func(f *form) { f.salt = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			got := submit(t, ctx, page, f)
			if got.Code != "usage" || !strings.HasPrefix(got.Text, "NOT CHECKED") || !strings.Contains(got.Text, "[usage]") {
				t.Errorf("the page shows %s: %q; want NOT CHECKED ... [usage]", got.Code, got.Text)
			}
		})
	}
}

// witnessKey is a cosignature/v1 witness: its verifier key and a
// cosignature line for a checkpoint's text at a timestamp.
type witnessKey struct {
	name string
	priv ed25519.PrivateKey
	id   []byte
	vkey string
}

func newWitness(t *testing.T, name string) *witnessKey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte{0x04}, pub...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return &witnessKey{name: name, priv: priv, id: h[:4], vkey: name + "+" + fmt.Sprintf("%x", h[:4]) + "+" + base64.StdEncoding.EncodeToString(key)}
}

// line is the witness's cosignature line on the note text at timestamp ts
// (docs/transparency.md §13.1).
func (w *witnessKey) line(text []byte, ts uint64) string {
	msg := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", ts)), text...)
	sig := append(append(bytes.Clone(w.id), binary.BigEndian.AppendUint64(nil, ts)...), ed25519.Sign(w.priv, msg)...)
	return "— " + w.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// TestFormWitnessField: the witnesses' keys pasted into the witness field,
// one a line, on the corpus's valid export cosigned by two witnesses (one
// at the timestamp 2^63-1, the largest the spec allows): the field is
// split at LF only, empty lines skipped, nothing trimmed. Then a witness
// on a checkpoint with a signature line named with U+FEFF.
func TestFormWitnessField(t *testing.T) {
	var c *corpusCase
	cases := readCorpus(t)
	for i := range cases {
		if cases[i].Name == "001-valid" {
			c = &cases[i]
		}
	}
	dir := t.TempDir()
	a := readArchive(t, corpusPath(t, c.Export))
	cp := a.file("checkpoint")
	text := cp[:bytes.LastIndex(cp, []byte("\n\n"))+1]
	w1, w2 := newWitness(t, "w1.example/witness"), newWitness(t, "w2.example/witness")
	cosigned := append(append(bytes.Clone(cp), w1.line(text, 1767225600)...), w2.line(text, 1<<63-1)...)
	for i := range a.files {
		a.files[i].data = bytes.ReplaceAll(a.files[i].data, cp, cosigned)
	}
	witnessed := a.write(t, filepath.Join(dir, "witnessed.tar.gz"))

	p := func(s string) *string { return &s }
	base := fromCase(t, c)
	base.file = witnessed
	page := offlinePage(t)
	ctx := tab(t, 1280, 900)
	for _, tc := range []struct {
		name, field, required, code string
	}{
		{"one key", w1.vkey, "", "ok"},
		{"one key with a final LF", w1.vkey + "\n", "", "ok"},
		{"two keys, a blank line between", w1.vkey + "\n\n" + w2.vkey + "\n", "2", "ok"},
		{"the key at 2^63-1", w2.vkey, "1", "ok"},
		{"a key with a trailing space", w1.vkey + " ", "", "witness.format"},
		{"a key with a trailing NBSP", w1.vkey + "\u00a0", "", "witness.format"},
		{"a key with a leading BOM", "\ufeff" + w1.vkey, "", "text.bom"},
		{"a key ending in U+0085", w1.vkey + "\u0085", "", "witness.format"},
		{"not a key", "not a key", "", "witness.format"},
		{"the same key twice", w1.vkey + "\n" + w1.vkey, "", "witness.duplicate"},
		{"2 required of 1 key", w1.vkey, "2", "usage"},
		{"a count without keys", "", "1", "usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			if tc.field != "" {
				f.witnesses = p(tc.field)
			}
			if tc.required != "" {
				f.required = p(tc.required)
			}
			got := submit(t, ctx, page, f)
			if got.Code != tc.code {
				t.Errorf("the page shows %s: %q; want %s", got.Code, got.Text, tc.code)
			}
		})
	}

	// A checkpoint with a signature line whose key name holds U+FEFF
	// (corpus case 016, valid without witnesses): a witness given that did
	// not cosign is missing, nothing else.
	t.Run("a signature line named with U+FEFF", func(t *testing.T) {
		for i := range cases {
			if cases[i].Name == "016-valid-signature-name-feff" {
				f := fromCase(t, &cases[i])
				f.witnesses = p(w1.vkey)
				if got := submit(t, ctx, page, f); got.Code != "checkpoint.witnesses" {
					t.Errorf("the page shows %s: %q; want checkpoint.witnesses", got.Code, got.Text)
				}
				return
			}
		}
		t.Fatal("no case 016-valid-signature-name-feff in the corpus")
	})
}
