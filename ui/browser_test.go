package ui_test

// The browser tests: the real shredd binary on 127.0.0.1 and a real
// headless Chromium (Debian's chromium package, installed by
// scripts/test-browser.sh; the tests fail, never skip, without it), driven
// with chromedp. One browser serves every test of this binary.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/ui"
)

var updateDocs = flag.Bool("update-docs", false, "copy the screenshots into docs/ui/")

var (
	tmpDir     string
	browserCtx context.Context // the shared browser; each test opens tabs on it
	browserErr error
	browserMu  sync.Mutex
	stopAll    []func()
	shreddBin  string
	buildOnce  sync.Once
	buildErr   error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "shredd-ui-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpDir = dir
	code := m.Run()
	for i := len(stopAll) - 1; i >= 0; i-- {
		stopAll[i]()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// chromiumPath is $SHREDD_CHROMIUM, else chromium on the PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHREDD_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the browser tests need Chromium (Debian package chromium): run ./scripts/test-browser.sh, which installs it")
	}
	return p
}

// browser returns the shared browser, started on first use.
func browser(t *testing.T) context.Context {
	t.Helper()
	browserMu.Lock()
	defer browserMu.Unlock()
	if browserCtx == nil && browserErr == nil {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.WindowSize(1280, 800), chromedp.Flag("allow-file-access-from-files", false),
			chromedp.UserDataDir(filepath.Join(tmpDir, "chromium-profile")))
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelB := chromedp.NewContext(actx)
		if browserErr = chromedp.Do(bctx); browserErr == nil {
			browserCtx = bctx
		}
		stopAll = append(stopAll, cancelA, cancelB)
	}
	if browserErr != nil {
		t.Fatalf("start chromium: %v", browserErr)
	}
	return browserCtx
}

// tab opens a new tab of the shared browser, closed at the end of the test.
func tab(t *testing.T, width, height int64) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t))
	t.Cleanup(cancel)
	// The first action on a tab opens it, and a timeout on that call's
	// context would close the tab with it: no timeout here.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls expr in the page until it is true.
func waitFor(t *testing.T, ctx context.Context, expr string, d time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// screenshot writes a PNG of the tab's viewport as a test artefact (in
// $SHREDD_UI_ARTIFACTS, else a temporary directory), and into docs/ui/
// with -update-docs.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	capture(t, ctx, name, *updateDocs)
}

// capture writes a PNG of the tab's viewport as a test artefact, and into
// docs/ui/ when toDocs.
func capture(t *testing.T, ctx context.Context, name string, toDocs bool) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	dir := os.Getenv("SHREDD_UI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "shredd-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if toDocs {
		if err := os.WriteFile(filepath.Join("..", "docs", "ui", name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s.png in %s", name, dir)
}

// noOverflow checks that the page is usable at the tab's width: nothing
// makes it scroll sideways.
func noOverflow(t *testing.T, ctx context.Context, view string) {
	t.Helper()
	if w := eval[float64](t, ctx, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		t.Errorf("%s: the page is %v px wider than the window", view, w)
	}
}

// ---- the real server ----

func buildShredd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		shreddBin = filepath.Join(tmpDir, "shredd")
		out, err := exec.Command("go", "build", "-o", shreddBin, "../cmd/shredd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return shreddBin
}

type server struct {
	t             *testing.T
	base, dataDir string
	admin, audit  string
}

// startShredd starts `shredd serve` on 127.0.0.1 in a fresh data
// directory, with a 1s key cache TTL so that forgets erase quickly, and
// creates an audit token with `shredd token create`.
func startShredd(t *testing.T) *server {
	t.Helper()
	bin := buildShredd(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--cache-ttl", "1s", "--epoch-interval", "1h", "--buckets", "4")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if !sent && json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" {
				addr <- l.Addr
				sent = true
			}
		}
	}()
	s := &server{t: t, dataDir: dir}
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-time.After(3 * time.Minute): // only a hang, even on a loaded machine
		t.Fatal("shredd did not listen within 3 minutes")
	}
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = strings.TrimSpace(string(tok))
	out, err := exec.Command(bin, "token", "create", "--name", "auditor", "--scopes", "audit", "--data-dir", dir).Output()
	if err != nil {
		t.Fatalf("shredd token create: %v", err)
	}
	s.audit = strings.TrimSpace(string(out))
	return s
}

// call makes an admin call and decodes a JSON answer into out (or returns
// the raw body).
func (s *server) call(method, path string, body any, out any) []byte {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, r)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// world is a server where alice and bob were forgotten and erased, alice
// with a plaintext-held artifact acked by its holder, and their exports.
type world struct {
	srv                 *server
	alice, bob          string // forget ids
	aliceSalt, bobSalt  string
	saved, latest       string // checkpoint files: saved before the forgets, latest after the exports
	savedSize           int64
	aliceExport, bobExp string
	key, logKey         string // attestation.pub and log.vkey of the data directory
	dir                 string
}

type forgetAnswer struct {
	Forget string `json:"forget"`
	State  string `json:"state"`
	Salt   string `json:"commitment_salt"`
}

// newWorld drives the server as an operator would, without the browser;
// onCommitted runs when both forgets are committed (not yet shredded).
func newWorld(t *testing.T, s *server, onCommitted func(w *world)) *world {
	w := &world{srv: s, dir: t.TempDir(), key: filepath.Join(s.dataDir, "attestation.pub"), logKey: filepath.Join(s.dataDir, "log.vkey")}
	for _, k := range []string{"episodic", "embedding"} {
		s.call("PUT", "/v1/kinds/"+k, nil, nil)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s.call("POST", "/v1/holders", map[string]string{"holder": "ann-index-1", "public_key": b64(pub)}, nil)
	var rec struct{ Artifact string }
	s.call("POST", "/v1/encrypt", map[string]string{"subject": "alice@example.com", "kind": "episodic", "plaintext": b64([]byte("Alice prefers tea"))}, &rec)
	var vec struct{ Artifact string }
	s.call("POST", "/v1/artifacts", map[string]any{"kind": "embedding", "parents": []string{rec.Artifact}, "holder": "ann-index-1"}, &vec)
	s.call("POST", "/v1/encrypt", map[string]string{"subject": "bob@example.com", "kind": "episodic", "plaintext": b64([]byte("Bob prefers coffee"))}, nil)
	w.saved = filepath.Join(w.dir, "saved.checkpoint")
	saved := s.call("GET", "/v1/log/checkpoint", nil, nil)
	writeFile(t, w.saved, saved)
	fmt.Sscanf(strings.Split(string(saved), "\n")[1], "%d", &w.savedSize)
	var fa, fb forgetAnswer
	s.call("POST", "/v1/forget", map[string]string{"subject": "alice@example.com"}, &fa)
	s.call("POST", "/v1/forget", map[string]string{"subject": "bob@example.com"}, &fb)
	w.alice, w.aliceSalt, w.bob, w.bobSalt = fa.Forget, fa.Salt, fb.Forget, fb.Salt
	if onCommitted != nil {
		onCommitted(w)
	}
	s.call("POST", "/v1/epoch", nil, nil)
	msg := attest.AckMessage(w.alice, "ann-index-1", []string{vec.Artifact})
	s.call("POST", "/v1/forgets/"+w.alice+"/acks", map[string]any{"holder": "ann-index-1", "artifacts": []string{vec.Artifact}, "signature": b64(ed25519.Sign(priv, msg))}, nil)
	for _, id := range []string{w.alice, w.bob} {
		deadline := time.Now().Add(3 * time.Minute) // only a hang, even on a loaded machine
		for {
			var f forgetAnswer
			s.call("POST", "/v1/forgets/"+id+"/verify", nil, &f)
			if f.State == "erased" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("forget %s is %s after 3 minutes", id, f.State)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	w.aliceExport = filepath.Join(w.dir, "alice.tar.gz")
	writeFile(t, w.aliceExport, s.call("GET", fmt.Sprintf("/v1/forgets/%s/export?since=%d", w.alice, w.savedSize), nil, nil))
	w.bobExp = filepath.Join(w.dir, "bob.tar.gz")
	writeFile(t, w.bobExp, s.call("GET", "/v1/forgets/"+w.bob+"/export", nil, nil))
	s.call("POST", "/v1/encrypt", map[string]string{"subject": "dave@example.com", "kind": "episodic", "plaintext": b64([]byte("Dave"))}, nil)
	w.latest = filepath.Join(w.dir, "latest.checkpoint")
	writeFile(t, w.latest, s.call("GET", "/v1/log/checkpoint", nil, nil))
	return w
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOperatorViews signs in with an audit token, watches a forget move
// from committed to erased in the list, opens its timeline, the holders'
// purge work and the log's checkpoint, at 1280×800 and at phone width,
// with a screenshot of each view.
func TestOperatorViews(t *testing.T) {
	s := startShredd(t)
	ctx := tab(t, 1280, 800)
	run(t, ctx, chromedp.Navigate(s.base+"/ui/"), chromedp.WaitVisible(chromedp.ID("view-signin")))
	screenshot(t, ctx, "signin")
	// A token without the audit scope is refused with the reason.
	run(t, ctx, chromedp.SetValue(chromedp.ID("token"), "shredd_not-a-token"), chromedp.Click(chromedp.CSS(`#signin-form button`)))
	waitFor(t, ctx, `document.getElementById('signin-error').textContent.includes('not valid')`, 10*time.Second)
	run(t, ctx, chromedp.SetValue(chromedp.ID("token"), s.audit), chromedp.Click(chromedp.CSS(`#signin-form button`)),
		chromedp.WaitVisible(chromedp.ID("view-forgets")))
	if where := eval[string](t, ctx, `JSON.stringify({url: location.href, cookie: document.cookie, stored: sessionStorage.getItem('shredd.token') !== null, local: localStorage.length})`); strings.Contains(where, s.audit) ||
		!strings.Contains(where, `"stored":true`) || !strings.Contains(where, `"local":0`) {
		t.Errorf("the token is not (only) in session storage: %s", where)
	}

	w := newWorld(t, s, func(w *world) {
		row := fmt.Sprintf(`document.querySelector('tr[data-forget="%s"]')`, w.alice)
		waitFor(t, ctx, row+` && `+row+`.dataset.state === 'committed'`, 15*time.Second)
		waitFor(t, ctx, `document.querySelector('.count[data-state=committed] .n').textContent === '2'`, 15*time.Second)
		screenshot(t, ctx, "forgets-committed")
		// The holders (GET /v1/holders): ann-index-1 owes its vector of
		// alice's forget, and has never acked; its row opens the work.
		run(t, ctx, chromedp.Navigate(s.base+"/ui/#/holders"), chromedp.WaitVisible(chromedp.ID("view-holders")))
		ann := `document.querySelector('#holders-table tr[data-holder="ann-index-1"]')`
		waitFor(t, ctx, ann+` && `+ann+`.dataset.pending === '1'`, 10*time.Second)
		if got := eval[string](t, ctx, ann+`.innerText`); !strings.Contains(got, "1 artifact in 1 forget") || !strings.Contains(got, "never") {
			t.Errorf("ann-index-1 before its ack: %q", got)
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(`#holders-table a[href="#/holders/ann-index-1"]`)))
		waitFor(t, ctx, fmt.Sprintf(`document.querySelector('#purges a[href="#/forget/%s"]') !== null`, w.alice), 10*time.Second)
		noOverflow(t, ctx, "holders")
		screenshot(t, ctx, "holders-pending")
		run(t, ctx, chromedp.Navigate(s.base+"/ui/#/forgets"), chromedp.WaitVisible(chromedp.ID("view-forgets")))
	})
	row := fmt.Sprintf(`document.querySelector('tr[data-forget="%s"]')`, w.alice)
	waitFor(t, ctx, row+` && `+row+`.dataset.state === 'erased'`, 15*time.Second)
	waitFor(t, ctx, `document.querySelector('.count[data-state=erased] .n').textContent === '2'`, 15*time.Second)
	noOverflow(t, ctx, "forgets")
	screenshot(t, ctx, "forgets")
	// The filter and the pages: erased only, one per page.
	run(t, ctx, chromedp.Click(chromedp.CSS(`.count[data-state=shredded]`)))
	waitFor(t, ctx, `document.querySelectorAll('#forgets-table tbody tr[data-forget]').length === 0`, 10*time.Second)
	run(t, ctx, chromedp.Click(chromedp.CSS(`.count[data-state=erased]`)))
	waitFor(t, ctx, `document.querySelectorAll('#forgets-table tbody tr[data-forget]').length === 2`, 10*time.Second)

	// The forget's timeline.
	run(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="#/forget/%s"]`, w.alice))), chromedp.WaitVisible(chromedp.ID("view-forget")))
	waitFor(t, ctx, `document.getElementById('forget-state').textContent === 'erased'`, 10*time.Second)
	steps := eval[string](t, ctx, `[...document.querySelectorAll('#timeline .step')].map(s => s.dataset.step + ':' + s.className.replace('step ', '')).join(' ')`)
	if want := "committed:done barrier:done epoch:done cache-ttl:done leases:done acks:done erased:done"; steps != want {
		t.Errorf("timeline %q, want %q", steps, want)
	}
	if n := eval[float64](t, ctx, `document.querySelectorAll('#verification tr[data-condition] .status-ok').length`); n != 5 {
		t.Errorf("%v of the five conditions shown ok", n)
	}
	noOverflow(t, ctx, "forget")
	screenshot(t, ctx, "forget")

	// Holders and the log: ann-index-1 acked (its last ack shown) and
	// reports a clean inventory; prompt-cache, registered since, never
	// acked and reports one that would block.
	s.call("POST", "/v1/holders/ann-index-1/inventory", map[string]any{"artifacts": []any{}}, nil)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	s.call("POST", "/v1/holders", map[string]string{"holder": "prompt-cache", "public_key": b64(pub)}, nil)
	s.call("POST", "/v1/holders/prompt-cache/inventory", map[string]any{"artifacts": []map[string]string{{"id": "00000000000000000000000000000000", "kind": "embedding"}}}, nil)
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/holders/ann-index-1"), chromedp.WaitVisible(chromedp.ID("view-holders")))
	waitFor(t, ctx, `document.getElementById('holder-result').textContent.includes('owes no purge')`, 10*time.Second)
	waitFor(t, ctx, `document.querySelectorAll('#holders-table tr[data-holder]').length === 2`, 10*time.Second)
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#holders-table tr[data-holder]')].map(r => r.dataset.holder + ' | ' + r.dataset.pending + ' | ' + r.querySelector('.last-ack').textContent + ' | ' + r.querySelector('.inventory').textContent)`)
	var apiPage struct {
		Holders []struct {
			Holder    string     `json:"holder"`
			LastAckAt *time.Time `json:"last_ack_at"`
		} `json:"holders"`
	}
	s.call("GET", "/v1/holders", nil, &apiPage)
	if len(rows) != 2 || len(apiPage.Holders) != 2 || apiPage.Holders[0].LastAckAt == nil ||
		rows[0] != "ann-index-1 | 0 | "+apiPage.Holders[0].LastAckAt.UTC().Format("2006-01-02 15:04:05Z")+" | clean 0 items, "+eval[string](t, ctx, `document.querySelector('#holders-table tr[data-holder="ann-index-1"] .inventory .muted').textContent.split(', ')[1]`) ||
		!strings.HasPrefix(rows[1], "prompt-cache | 0 | never | blocks forgets 1 item, 1 unknown artifact, 0 unknown kinds, ") {
		t.Errorf("the holders' rows: %q, the API's: %+v", rows, apiPage)
	}
	noOverflow(t, ctx, "holders")
	screenshot(t, ctx, "holders")
	// Pages of 25: 27 holders make two.
	for i := range 25 {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		s.call("POST", "/v1/holders", map[string]string{"holder": fmt.Sprintf("worker-%02d", i), "public_key": b64(pub)}, nil)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("holders-refresh")))
	waitFor(t, ctx, `document.querySelectorAll('#holders-table tr[data-holder]').length === 25 && !document.getElementById('holders-next').disabled`, 10*time.Second)
	run(t, ctx, chromedp.Click(chromedp.ID("holders-next")))
	waitFor(t, ctx, `[...document.querySelectorAll('#holders-table tr[data-holder]')].map(r => r.dataset.holder).join(' ') === 'worker-23 worker-24' && document.getElementById('holders-next').disabled`, 10*time.Second)
	run(t, ctx, chromedp.Click(chromedp.ID("holders-prev")))
	waitFor(t, ctx, `document.querySelector('#holders-table tr[data-holder]').dataset.holder === 'ann-index-1' && document.getElementById('holders-prev').disabled`, 10*time.Second)
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/log"), chromedp.WaitVisible(chromedp.ID("view-log")))
	waitFor(t, ctx, `document.getElementById('tree-size') !== null && document.getElementById('log-key').textContent.length > 0`, 10*time.Second)
	screenshot(t, ctx, "log")

	// At phone width.
	phone := tab(t, 390, 844)
	run(t, phone, chromedp.Navigate(s.base+"/ui/"), chromedp.WaitVisible(chromedp.ID("view-signin")),
		chromedp.SetValue(chromedp.ID("token"), s.audit), chromedp.Click(chromedp.CSS(`#signin-form button`)),
		chromedp.WaitVisible(chromedp.ID("view-forgets")))
	waitFor(t, phone, `document.querySelectorAll('#forgets-table tbody tr[data-forget]').length === 2`, 10*time.Second)
	noOverflow(t, phone, "forgets at phone width")
	screenshot(t, phone, "phone-forgets")
	run(t, phone, chromedp.Navigate(s.base+"/ui/#/forget/"+w.alice), chromedp.WaitVisible(chromedp.ID("view-forget")))
	waitFor(t, phone, `document.getElementById('forget-state').textContent === 'erased'`, 10*time.Second)
	noOverflow(t, phone, "forget at phone width")
	screenshot(t, phone, "phone-forget")
	run(t, phone, chromedp.Navigate(s.base+"/ui/#/holders/ann-index-1"), chromedp.WaitVisible(chromedp.ID("view-holders")))
	waitFor(t, phone, `document.querySelectorAll('#holders-table tr[data-holder]').length === 25 && document.getElementById('holder-result').textContent.includes('owes no purge')`, 10*time.Second)
	noOverflow(t, phone, "holders at phone width")
	screenshot(t, phone, "phone-holders")
}

// ---- the verifier: one table for the browser and shredd verify ----

// archive is an export's files, in order, to tamper with.
type archive struct {
	dir   string
	files []struct {
		name string
		data []byte
	}
}

func readArchive(t *testing.T, path string) *archive {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	a := &archive{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return a
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		dir, name := filepath.Split(h.Name)
		a.dir = dir
		a.files = append(a.files, struct {
			name string
			data []byte
		}{name, data})
	}
}

func (a *archive) clone() *archive {
	c := &archive{dir: a.dir}
	for _, f := range a.files {
		c.files = append(c.files, struct {
			name string
			data []byte
		}{f.name, bytes.Clone(f.data)})
	}
	return c
}

func (a *archive) file(name string) []byte {
	for _, f := range a.files {
		if f.name == name {
			return f.data
		}
	}
	return nil
}

func (a *archive) set(name string, data []byte) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files[i].data = data
			return
		}
	}
	a.files = append(a.files, struct {
		name string
		data []byte
	}{name, data})
}

func (a *archive) remove(names ...string) {
	out := a.files[:0]
	for _, f := range a.files {
		keep := true
		for _, n := range names {
			keep = keep && f.name != n
		}
		if keep {
			out = append(out, f)
		}
	}
	a.files = out
}

// entry returns the base name of the entry of an event.
func (a *archive) entry(t *testing.T, event string) string {
	t.Helper()
	for _, f := range a.files {
		if strings.HasPrefix(f.name, "entry-") && strings.HasSuffix(f.name, "-"+event+".json") {
			return strings.TrimSuffix(f.name, ".json")
		}
	}
	t.Fatalf("no %s entry in the export", event)
	return ""
}

func (a *archive) write(t *testing.T, path string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range a.files {
		if err := tw.WriteHeader(&tar.Header{Name: a.dir + f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(1_800_000_000, 0)}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	zw.Close()
	writeFile(t, path, buf.Bytes())
	return path
}

// flipLetter swaps the case of the letter nearest the middle of b.
func flipLetter(t *testing.T, b []byte) []byte {
	t.Helper()
	c := bytes.Clone(b)
	for d := 0; d < len(c); d++ {
		for _, i := range []int{len(c)/2 + d, len(c)/2 - d} {
			if i >= 0 && i < len(c) && (c[i] >= 'a' && c[i] <= 'z' || c[i] >= 'A' && c[i] <= 'Z') {
				c[i] ^= 0x20
				return c
			}
		}
	}
	t.Fatal("no letter to flip")
	return nil
}

// proofHashLines returns the hash lines of a tlog-proof.
func proofHashLines(p []byte) []string {
	var out []string
	for _, l := range strings.Split(string(p), "\n")[2:] {
		if l == "" {
			break
		}
		out = append(out, l)
	}
	return out
}

// verifyCase is one row of the table that drives both verifiers.
type verifyCase struct {
	name               string
	file               string // an export (.tar.gz) or an attestation
	key, logKey, saved string // files; saved "" for none
	subject, salt      string
	verified           bool
	cli                []string // in the output of shredd verify
	check              string   // the check the page names as failed
	attestationOnly    bool
}

// verifyCases builds the table: the examples of docs/examples, and a copy
// of a real export for each kind of tampering TestExportTamper
// (cmd/shredd) covers, but the forked logs, which need a second server.
func verifyCases(t *testing.T, w *world) []verifyCase {
	dir := t.TempDir()
	ex := "../docs/examples/"
	exSalt := "378253bbfad50c6fb0483662fd60ff3bfbde5304b67d0a7a595102e24aa7e307"
	attSalt := "8e7f4a3e252767cd3f67684b651d58d0f8b6e5d3c06820c7710ef8e6a7dcc1da"
	exAtt := readFile(t, ex+"walkthrough.attestation.json")
	flippedAtt := filepath.Join(dir, "flipped.attestation.json")
	writeFile(t, flippedAtt, flipLetter(t, exAtt))
	cases := []verifyCase{
		{name: "docs/examples export", file: ex + "walkthrough.export.tar.gz", key: ex + "walkthrough.export.attestation.pub", logKey: ex + "walkthrough.export.log.vkey",
			saved: ex + "walkthrough.export.checkpoint", subject: "alice@example.com", salt: exSalt, verified: true, cli: []string{"VERIFIED: forget 28816bcff70cb6ecd78b01bd281f770a"}},
		{name: "docs/examples export, another subject", file: ex + "walkthrough.export.tar.gz", key: ex + "walkthrough.export.attestation.pub", logKey: ex + "walkthrough.export.log.vkey",
			saved: ex + "walkthrough.export.checkpoint", subject: "bob@example.com", salt: exSalt, cli: []string{"subject"}, check: "subject"},
		{name: "docs/examples attestation", file: ex + "walkthrough.attestation.json", key: ex + "walkthrough.attestation.pub", subject: "alice@example.com", salt: attSalt,
			verified: true, cli: []string{"VERIFIED: the subject's data was cryptographically erased"}, attestationOnly: true},
		{name: "docs/examples attestation, another subject", file: ex + "walkthrough.attestation.json", key: ex + "walkthrough.attestation.pub", subject: "bob@example.com", salt: attSalt,
			cli: []string{"FAIL  subject"}, check: "subject", attestationOnly: true},
		{name: "docs/examples attestation, a flipped byte", file: flippedAtt, key: ex + "walkthrough.attestation.pub", subject: "alice@example.com", salt: attSalt,
			cli: []string{"FAIL  envelope.signature"}, check: "signature", attestationOnly: true},
		{name: "docs/examples attestation, another key", file: ex + "walkthrough.attestation.json", key: w.key, subject: "alice@example.com", salt: attSalt,
			cli: []string{"FAIL  envelope.signature"}, check: "signature", attestationOnly: true},
	}
	good := verifyCase{file: w.aliceExport, key: w.key, logKey: w.logKey, saved: w.saved, subject: "alice@example.com", salt: w.aliceSalt}
	base, bob := readArchive(t, w.aliceExport), readArchive(t, w.bobExp)
	add := func(name string, edit func(a *archive), args func(c *verifyCase), verified bool, check string, cli ...string) {
		c := good
		c.name, c.verified, c.check, c.cli = name, verified, check, cli
		if edit != nil {
			a := base.clone()
			edit(a)
			c.file = a.write(t, filepath.Join(dir, fmt.Sprintf("case-%02d.tar.gz", len(cases))))
		}
		if args != nil {
			args(&c)
		}
		cases = append(cases, c)
	}
	add("the export as made", nil, nil, true, "", "VERIFIED: forget "+w.alice)
	for _, f := range base.files {
		name := f.name
		edit := func(a *archive) { a.set(name, flipLetter(t, a.file(name))) }
		switch {
		case name == "README.txt" || name == "check-inclusion.py" || name == "attestation.pub" || name == "log.vkey":
			add("flip a byte of "+name, edit, nil, true, "", "VERIFIED: forget "+w.alice)
		case name == "consistency.proof":
			add("flip a byte of "+name, edit, nil, false, "consistency", "consistency")
		case strings.HasPrefix(name, "entry-"):
			e := strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".tlog-proof")
			add("flip a byte of "+name, edit, nil, false, "entry "+e, e)
		default:
			add("flip a byte of "+name, edit, nil, false, strings.TrimSuffix(name, ".json"), name)
		}
	}
	fc, ack := base.entry(t, attest.EventForgetCommitted), base.entry(t, attest.EventHolderAck)
	add("drop a hash line of a proof", func(a *archive) {
		p := string(a.file(fc + ".tlog-proof"))
		h := proofHashLines([]byte(p))
		a.set(fc+".tlog-proof", []byte(strings.Replace(p, h[len(h)/2]+"\n", "", 1)))
	}, nil, false, "entry "+fc, fc, "not in tree")
	add("flip a hash of a proof", func(a *archive) {
		p := a.file(ack + ".tlog-proof")
		h := proofHashLines(p)[0]
		a.set(ack+".tlog-proof", bytes.Replace(p, []byte(h), flipLetter(t, []byte(h)), 1))
	}, nil, false, "entry "+ack, ack, "not in tree")
	add("swap the contents of two entries, names kept", func(a *archive) {
		for _, ext := range []string{".json", ".tlog-proof"} {
			x, y := a.file(fc+ext), a.file(ack+ext)
			a.set(fc+ext, y)
			a.set(ack+ext, x)
		}
	}, nil, false, "entry "+fc, "proves index")
	add("swap two entries' data, proofs kept", func(a *archive) {
		x, y := a.file(fc+".json"), a.file(ack+".json")
		a.set(fc+".json", y)
		a.set(ack+".json", x)
	}, nil, false, "entry "+fc, "not in tree")
	add("drop the proof of an entry", func(a *archive) { a.remove(ack + ".tlog-proof") }, nil, false, "archive", ack, "needs both")
	add("add an unknown file", func(a *archive) { a.set("notes.txt", []byte("trust me\n")) }, nil, false, "archive", "unknown file", "notes.txt")
	add("drop the consistency proof", func(a *archive) { a.remove("consistency.proof") }, nil, false, "consistency", "no consistency.proof", fmt.Sprintf("since=%d", w.savedSize))
	for _, event := range []string{attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventHolderAck, attest.EventEpochCompleted, attest.EventErasureAttested} {
		name := base.entry(t, event)
		add("drop the "+event+" entry", func(a *archive) { a.remove(name+".json", name+".tlog-proof") }, nil, false, "entries", event)
	}
	for _, c := range []struct{ event, want string }{
		{attest.EventForgetCommitted, "the forget_committed entry is about another forget"},
		{attest.EventErasureAttested, "the erasure_attested entry does not name this attestation"},
		{attest.EventKeyCreated, "the key_created entry is not the one the forget_committed entry names"},
	} {
		mine, theirs := base.entry(t, c.event), bob.entry(t, c.event)
		add("replace the "+c.event+" entry with the other forget's", func(a *archive) {
			a.remove(mine+".json", mine+".tlog-proof")
			a.set(theirs+".json", bob.file(theirs+".json"))
			a.set(theirs+".tlog-proof", bob.file(theirs+".tlog-proof"))
		}, nil, false, "entries", c.want)
	}
	add("add the other forget's key_created entry", func(a *archive) {
		theirs := bob.entry(t, attest.EventKeyCreated)
		a.set(theirs+".json", bob.file(theirs+".json"))
		a.set(theirs+".tlog-proof", bob.file(theirs+".tlog-proof"))
	}, nil, false, "entries", "key_created")
	add("replace the attestation with the other forget's", func(a *archive) { a.set("attestation.json", bob.file("attestation.json")) }, nil,
		false, "attestation", "attestation.json is about forget "+w.bob)

	// Checkpoints and keys.
	vkey := strings.TrimSpace(string(readFile(t, w.logKey)))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	otherSKey, otherVKey, _ := note.GenerateKey(rand.Reader, v.Name())
	otherSigner, _ := note.NewSigner(otherSKey)
	_, strangerVKey, _ := note.GenerateKey(rand.Reader, "shredd/0123456789abcdef")
	otherVKeyFile, strangerVKeyFile := filepath.Join(dir, "other.vkey"), filepath.Join(dir, "stranger.vkey")
	writeFile(t, otherVKeyFile, []byte(otherVKey+"\n"))
	writeFile(t, strangerVKeyFile, []byte(strangerVKey+"\n"))
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherPEM, _ := attest.MarshalPublicKey(otherPriv.Public().(ed25519.PublicKey))
	otherPub := filepath.Join(dir, "other.pub")
	writeFile(t, otherPub, otherPEM)
	resign := func(signed []byte) []byte {
		text, _, _ := bytes.Cut(signed, []byte("\n\n"))
		b, err := note.Sign(&note.Note{Text: string(text) + "\n"}, otherSigner)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	savedByOther := filepath.Join(dir, "saved-by-other.checkpoint")
	writeFile(t, savedByOther, resign(readFile(t, w.saved)))
	resignAll := func(a *archive) {
		old := a.file("checkpoint")
		forged := resign(old)
		for i := range a.files {
			a.files[i].data = bytes.Replace(a.files[i].data, old, forged, 1)
		}
	}
	add("a saved checkpoint newer than the export", nil, func(c *verifyCase) { c.saved = w.latest }, false, "consistency", "newer than the export's")
	add("a saved checkpoint signed by another log key", nil, func(c *verifyCase) { c.saved = savedByOther }, false, "consistency", "saved checkpoint", "verification failed")
	add("the export's checkpoint and proofs signed by another log key", func(a *archive) { resignAll(a); a.set("log.vkey", []byte(otherVKey+"\n")) }, nil,
		false, "checkpoint", "checkpoint", "verification failed")
	add("the export's checkpoint and proofs signed by another log key, and that key given", resignAll, func(c *verifyCase) { c.logKey = otherVKeyFile },
		false, "consistency", "saved checkpoint", "verification failed")
	add("wrong attestation key", nil, func(c *verifyCase) { c.key = otherPub }, false, "attestation", "attestation.json", "signature")
	add("wrong log key of the same name", nil, func(c *verifyCase) { c.logKey = otherVKeyFile }, false, "checkpoint", "checkpoint", "verification failed")
	add("wrong log key of another log", nil, func(c *verifyCase) { c.logKey = strangerVKeyFile }, false, "checkpoint", "checkpoint", "verification failed")
	add("wrong subject", nil, func(c *verifyCase) { c.subject = "bob@example.com" }, false, "subject", "subject")
	add("wrong salt", nil, func(c *verifyCase) { c.salt = w.bobSalt }, false, "subject", "subject")
	add("no saved checkpoint", nil, func(c *verifyCase) { c.saved = "" }, true, "", "VERIFIED: forget "+w.alice, "consistency  not checked")
	return cases
}

// runCLI runs shredd verify on a case: its exit status and output.
func runCLI(t *testing.T, c verifyCase) (int, string) {
	t.Helper()
	args := []string{"verify", c.file, "--key", c.key, "--subject", c.subject, "--salt", c.salt}
	if !c.attestationOnly {
		args = append(args, "--log-key", c.logKey)
		if c.saved != "" {
			args = append(args, "--checkpoint", c.saved)
		}
	}
	out, err := exec.Command(buildShredd(t), args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// offlinePage copies the page's files to a directory, as a regulator who
// saved the page would have them, and returns the file:// URL of its
// verifier.
func offlinePage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(ui.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(ui.Files(), p)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, p), b, 0o644)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(filepath.Join(dir, "index.html"))
	return (&url.URL{Scheme: "file", Path: abs, Fragment: "/verify"}).String()
}

// TestVerifierAgreesWithShreddVerify runs every case of the table through
// `shredd verify` and through the page's verifier opened from disk
// (file://) in a tab whose network is off, and requires the same verdict,
// and the failing check named: they agree on every case. No request other
// than the page's own files may leave the tab.
func TestVerifierAgreesWithShreddVerify(t *testing.T) {
	s := startShredd(t)
	w := newWorld(t, s, nil)
	cases := verifyCases(t, w)
	page := offlinePage(t)
	ctx := tab(t, 1280, 800)

	checkRequests := watchRequests(ctx)

	shots := map[string]string{"docs/examples export": "verify-verified", "flip a byte of checkpoint": "verify-not-verified"}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := runCLI(t, c)
			if (code == 0) != c.verified || (code != 0 && code != 1) {
				t.Fatalf("shredd verify: exit %d, want verified=%v\n%s", code, c.verified, out)
			}
			for _, want := range c.cli {
				if !strings.Contains(out, want) {
					t.Errorf("shredd verify does not say %q:\n%s", want, out)
				}
			}
			key, logKey := readFile(t, c.key), []byte{}
			if c.logKey != "" {
				logKey = readFile(t, c.logKey)
			}
			// A fresh load of the page for every case (the query makes it
			// another document, not a jump within the same one).
			steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(strings.Replace(page, "#", fmt.Sprintf("?case=%d#", i), 1)),
				chromedp.WaitVisible(chromedp.ID("view-verify")),
				chromedp.SetUploadFiles(chromedp.ID("v-file"), []string{abs(t, c.file)}), chromedp.SetValue(chromedp.ID("v-key"), string(key))}
			for id, v := range map[string]string{"v-logkey": strings.TrimSpace(string(logKey)), "v-subject": c.subject, "v-salt": c.salt} {
				if v != "" {
					steps = append(steps, chromedp.SetValue(chromedp.ID(id), v))
				}
			}
			if c.saved != "" && !c.attestationOnly {
				steps = append(steps, chromedp.SetUploadFiles(chromedp.ID("v-saved"), []string{abs(t, c.saved)}))
			}
			steps = append(steps, chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)))
			run(t, ctx, steps...)
			waitFor(t, ctx, `document.getElementById('verdict').dataset.verified !== undefined`, 30*time.Second)
			verified := eval[string](t, ctx, `document.getElementById('verdict').dataset.verified`)
			failed := eval[string](t, ctx, `document.getElementById('verdict').dataset.failed`)
			verdict := eval[string](t, ctx, `document.getElementById('verdict').textContent`)
			if (verified == "true") != (code == 0) {
				t.Fatalf("the page says %q, shredd verify exits %d:\n%s", verdict, code, out)
			}
			if failed != c.check {
				t.Errorf("the page names check %q, want %q: %s\nshredd verify:\n%s", failed, c.check, verdict, out)
			}
			if want := map[bool]string{true: "VERIFIED", false: "NOT VERIFIED"}[c.verified]; !strings.HasPrefix(verdict, want) {
				t.Errorf("the page says %q, want %s", verdict, want)
			}
			if name := shots[c.name]; name != "" {
				screenshot(t, ctx, name)
				noOverflow(t, ctx, "verify")
			}
			t.Logf("page: %s", verdict)
		})
	}
	checkRequests(t)
}

// watchRequests records every request the tab of ctx makes (chromedp
// enables the Network domain of every tab: file:// ones are seen too) and
// returns the check to run at the end: each request was for one of the
// page's own files, and the watch saw any at all.
func watchRequests(ctx context.Context) func(t *testing.T) {
	var mu sync.Mutex
	var requests []string
	events := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			mu.Lock()
			requests = append(requests, ev.Request.URL)
			mu.Unlock()
		}
	}()
	return func(t *testing.T) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(requests) == 0 {
			t.Error("no request was seen at all: the network watch does not work")
		}
		for _, u := range requests {
			if !strings.HasPrefix(u, "file://") {
				t.Errorf("the verifier made a request: %s", u)
			}
		}
	}
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestVerifierPhoneWidth: the verifier, served by shredd, at phone width.
func TestVerifierPhoneWidth(t *testing.T) {
	s := startShredd(t)
	ctx := tab(t, 390, 844)
	ex := "../docs/examples/"
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/verify"), chromedp.WaitVisible(chromedp.ID("view-verify")),
		chromedp.SetUploadFiles(chromedp.ID("v-file"), []string{abs(t, ex+"walkthrough.export.tar.gz")}),
		chromedp.SetValue(chromedp.ID("v-key"), string(readFile(t, ex+"walkthrough.export.attestation.pub"))),
		chromedp.SetValue(chromedp.ID("v-logkey"), strings.TrimSpace(string(readFile(t, ex+"walkthrough.export.log.vkey")))),
		chromedp.SetUploadFiles(chromedp.ID("v-saved"), []string{abs(t, ex+"walkthrough.export.checkpoint")}),
		chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)))
	waitFor(t, ctx, `document.getElementById('verdict').dataset.verified === 'true'`, 30*time.Second)
	noOverflow(t, ctx, "verify at phone width")
	run(t, ctx, chromedp.ScrollIntoView(chromedp.ID("verdict")))
	screenshot(t, ctx, "phone-verify")
}
