package ui_test

// The page's own behaviour in a real headless Chromium, served by the real
// shredd binary and opened from disk: routes that cannot reach another API
// path, the purge work of holders whose ids hold '@' and ':', a pending
// epoch that does not read as done, the holders that block a forget, a
// sign-out that leaves nothing behind, no sideways scrolling at 1280 and
// 390 px, the verifier's offline mode and policy, and its verdict saying
// what `shredd verify` prints.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// netReq is one request a tab made.
type netReq struct {
	url  string
	auth bool // it carried an Authorization header
}

// netLog records every request a tab makes (chromedp enables the Network
// domain of every tab, file:// requests included).
type netLog struct {
	mu   sync.Mutex
	reqs []netReq
}

func watchNet(ctx context.Context) *netLog {
	l := &netLog{}
	events := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			_, auth := ev.Request.Headers["Authorization"]
			l.mu.Lock()
			l.reqs = append(l.reqs, netReq{url: ev.Request.URL, auth: auth})
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *netLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *netLog) since(n int) []netReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]netReq(nil), l.reqs[n:]...)
}

// waitForRequest waits until the tab has made a request, after the n-th,
// whose URL path is path: every request made before it is in the log.
func (l *netLog) waitForRequest(t *testing.T, n int, path string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // only a hang, even on a loaded machine
	for time.Now().Before(deadline) {
		for _, r := range l.since(n) {
			if u, err := url.Parse(r.url); err == nil && u.Path == path {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no request for %s was seen", path)
}

// noSidewaysScroll: nothing in the shown view scrolls sideways: neither
// the document nor any element of the view that scrolls (a table's
// wrapper, a <pre>) is wider than its box.
func noSidewaysScroll(t *testing.T, ctx context.Context, view string) {
	t.Helper()
	bad := eval[[]string](t, ctx, `(() => {
		const bad = [], d = document.documentElement;
		if (d.scrollWidth > d.clientWidth) bad.push('the document: ' + d.scrollWidth + ' > ' + d.clientWidth);
		const sec = document.querySelector('main > section:not([hidden])');
		for (const e of [document.querySelector('header'), sec, ...sec.querySelectorAll('*')]) {
			const o = getComputedStyle(e).overflowX;
			if ((o === 'auto' || o === 'scroll' || e === sec) && e.scrollWidth > e.clientWidth) bad.push((e.id || e.tagName.toLowerCase() + '.' + e.className) + ': ' + e.scrollWidth + ' > ' + e.clientWidth);
		}
		return bad;
	})()`)
	if len(bad) > 0 {
		t.Errorf("%s scrolls sideways at %v px: %s", view, eval[float64](t, ctx, `window.innerWidth`), strings.Join(bad, "; "))
	}
}

// pageWorld: two holders whose ids hold '@' and ':', one of them 120
// characters long, each holding an embedding of alice's record; alice's
// forget committed (the epoch is an hour away).
type pageWorld struct {
	at, long, alice string
}

func newPageWorld(t *testing.T, s *server) *pageWorld {
	w := &pageWorld{at: "ops@eu-west:1", long: "memory-replica-" + strings.Repeat("0123456789", 10) + "@eu:1"}
	for _, k := range []string{"episodic", "embedding"} {
		s.call("PUT", "/v1/kinds/"+k, nil, nil)
	}
	var rec struct{ Artifact string }
	s.call("POST", "/v1/encrypt", map[string]string{"subject": "alice@example.com", "kind": "episodic", "plaintext": b64([]byte("Alice prefers tea"))}, &rec)
	for _, h := range []string{w.at, w.long} {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		s.call("POST", "/v1/holders", map[string]string{"holder": h, "public_key": b64(pub)}, nil)
		s.call("POST", "/v1/artifacts", map[string]any{"kind": "embedding", "parents": []string{rec.Artifact}, "holder": h}, nil)
	}
	var f forgetAnswer
	s.call("POST", "/v1/forget", map[string]string{"subject": "alice@example.com"}, &f)
	w.alice = f.Forget
	return w
}

// artefact writes a screenshot as a test artefact only: docs/ui/ shows
// the views of browser_test.go.
func artefact(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	capture(t, ctx, name, false)
}

func signIn(t *testing.T, ctx context.Context, s *server) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(s.base+"/ui/"), chromedp.WaitVisible(chromedp.ID("view-signin")),
		chromedp.SetValue(chromedp.ID("token"), s.audit), chromedp.Click(chromedp.CSS(`#signin-form button`)),
		chromedp.WaitVisible(chromedp.ID("view-forgets")))
}

func steps(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `[...document.querySelectorAll('#timeline .step')].map(s => s.dataset.step + ':' + s.className.replace('step ', '')).join(' ')`)
}

// TestPageOperatorDefects drives the operator views through the cases
// that broke them, at 1280 and 390 px.
func TestPageOperatorDefects(t *testing.T) {
	s := startShredd(t)
	w := newPageWorld(t, s)
	ctx := tab(t, 1280, 800)
	net := watchNet(ctx)
	signIn(t, ctx, s)

	// A pending epoch: its step does not say the root versions are
	// destroyed, and no step after it is green, though the cache TTL (1s)
	// passes and no lease is live.
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/forget/"+w.alice), chromedp.WaitVisible(chromedp.ID("view-forget")))
	waitFor(t, ctx, `document.getElementById('forget-state').textContent === 'committed'`, 10*time.Second)
	waitFor(t, ctx, `document.querySelector('#timeline [data-step="cache-ttl"]').classList.contains('ready')`, 15*time.Second)
	got := steps(t, ctx)
	if want := "committed:done barrier:done epoch:pending cache-ttl:ready leases:ready acks:pending erased:pending"; got != want {
		t.Errorf("timeline with the epoch pending: %q, want %q", got, want)
	}
	if note := eval[string](t, ctx, `document.querySelector('#timeline [data-step="epoch"] .note').textContent`); strings.Contains(note, "destroyed") {
		t.Errorf("the pending epoch reads %q", note)
	}
	// The holders owing an ack, each a link to its page.
	owing := eval[[]string](t, ctx, `[...document.querySelectorAll('#owing a')].map(a => a.textContent + ' ' + a.getAttribute('href'))`)
	if want := []string{w.long + " #/holders/" + url.QueryEscape(w.long), w.at + " #/holders/ops%40eu-west%3A1"}; strings.Join(owing, "|") != strings.Join(want, "|") {
		t.Errorf("owing %q, want %q", owing, want)
	}
	artefact(t, ctx, "page-epoch-pending")

	// The purge work of a holder whose id holds '@' and ':', from its link.
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/holders"), chromedp.WaitVisible(chromedp.ID("view-holders")))
	waitFor(t, ctx, `document.querySelectorAll('#holders-table tr[data-holder]').length === 2`, 10*time.Second)
	n := net.len()
	run(t, ctx, chromedp.Click(chromedp.CSS(`#holders-table a[href="#/holders/ops%40eu-west%3A1"]`)))
	waitFor(t, ctx, fmt.Sprintf(`document.querySelector('#purges a[href="#/forget/%s"]') !== null`, w.alice), 10*time.Second)
	if got := eval[string](t, ctx, `document.getElementById('holder-name').textContent`); got != w.at {
		t.Errorf("the purge work shown is %q's", got)
	}
	net.waitForRequest(t, n, "/v1/holders/ops@eu-west:1/purges")
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/holders/"+url.QueryEscape(w.long)))
	waitFor(t, ctx, fmt.Sprintf(`document.getElementById('holder-name').textContent === %q && document.querySelector('#purges a[href="#/forget/%s"]') !== null`, w.long, w.alice), 10*time.Second)
	noSidewaysScroll(t, ctx, "holders")

	// Hash routes never make the page ask another API path: a holder or
	// forget id that is ".", "..", holds a "/" or more segments is refused
	// before any request.
	for _, c := range []struct{ hash, view, says string }{
		{"#/holders/..", "holders", "Not a holder id"},
		{"#/holders/.", "holders", "Not a holder id"},
		{"#/holders/%2e%2E", "holders", "Not a holder id"},
		{"#/holders/..%2F..%2Flog%2Fkey", "holders", "Not a holder id"},
		{"#/holders/a%2Fpurges", "holders", "Not a holder id"},
		{"#/holders/ops%2540eu", "holders", "Not a holder id"},
		{"#/holders/%ZZ", "forgets", "names no view"},
		{"#/holders/ops/../../log/key", "forgets", "names no view"},
		{"#/forget/..%2F..%2Flog%2Fkey", "forget", "Not a forget id"},
		{"#/forget/../../log/key", "forgets", "names no view"},
		{"#/forget/" + strings.ToUpper(w.alice), "forget", "Not a forget id"},
	} {
		n := net.len()
		run(t, ctx, chromedp.Navigate(s.base+"/ui/"+c.hash))
		where := map[string]string{"holders": "holder-result", "forget": "forget-error", "forgets": "forgets-table"}[c.view]
		waitFor(t, ctx, fmt.Sprintf(`document.body.dataset.view === %q && document.getElementById(%q).textContent.includes(%q)`, c.view, where, c.says), 10*time.Second)
		// A request of a known path after the route: every request the
		// route made is in the log before it.
		run(t, ctx, chromedp.Navigate(s.base+"/ui/#/log"))
		net.waitForRequest(t, n, "/v1/log/checkpoint")
		for _, r := range net.since(n) {
			u, _ := url.Parse(r.url)
			if u.Path != "/v1/holders" && u.Path != "/v1/log/checkpoint" && u.Path != "/v1/log/key" {
				t.Errorf("route %s made the page ask %s (token sent: %v)", c.hash, r.url, r.auth)
			}
		}
	}

	// A blocked forget names the holders that block it, from the API's
	// verification.
	s.call("POST", "/v1/holders/"+w.at+"/inventory", map[string]any{"artifacts": []map[string]string{{"id": "ffffffffffffffffffffffffffffffff", "kind": "embedding"}}}, nil)
	run(t, ctx, chromedp.Navigate(s.base+"/ui/#/forget/"+w.alice), chromedp.WaitVisible(chromedp.ID("view-forget")))
	waitFor(t, ctx, `document.getElementById('forget-state').textContent === 'blocked'`, 10*time.Second)
	blocked := eval[string](t, ctx, `document.getElementById('blocked-by').textContent`)
	links := eval[[]string](t, ctx, `[...document.querySelectorAll('#blocked-by a')].map(a => a.getAttribute('href'))`)
	if !strings.Contains(blocked, "Blocked by holder "+w.at+":") || strings.Join(links, " ") != "#/holders/ops%40eu-west%3A1" {
		t.Errorf("blocked-by says %q, links %q", blocked, links)
	}
	if note := eval[string](t, ctx, `document.querySelector('#timeline [data-step="acks"]').className + ' ' + document.querySelector('#timeline [data-step="acks"] .note').textContent`); note != "step failed blocked by "+w.at {
		t.Errorf("the acks step: %q", note)
	}
	noSidewaysScroll(t, ctx, "a blocked forget")
	artefact(t, ctx, "page-blocked")

	// Every view at 1280 and at 390 px: nothing scrolls sideways.
	phone := tab(t, 390, 844)
	signIn(t, phone, s)
	for _, c := range []struct{ ctx context.Context }{{ctx}, {phone}} {
		for _, v := range []struct{ hash, ready string }{
			{"#/forgets", `document.querySelectorAll('#forgets-table tr[data-forget]').length === 1`},
			{"#/forget/" + w.alice, `document.getElementById('forget-state').textContent === 'blocked' && document.getElementById('blocked-by').textContent !== ''`},
			{"#/holders/" + url.QueryEscape(w.long), `document.querySelectorAll('#holders-table tr[data-holder]').length === 2 && document.getElementById('purges') !== null`},
			{"#/log", `document.getElementById('log-key').textContent.length > 0`},
		} {
			run(t, c.ctx, chromedp.Navigate(s.base+"/ui/"+v.hash))
			waitFor(t, c.ctx, v.ready, 10*time.Second)
			noSidewaysScroll(t, c.ctx, v.hash)
		}
	}
	artefact(t, phone, "page-phone-log")
	run(t, phone, chromedp.Navigate(s.base+"/ui/#/holders/"+url.QueryEscape(w.long)))
	waitFor(t, phone, `document.getElementById('purges') !== null`, 10*time.Second)
	artefact(t, phone, "page-phone-holders")
	run(t, phone, chromedp.Navigate(s.base+"/ui/#/forget/"+w.alice))
	waitFor(t, phone, `document.getElementById('blocked-by').textContent !== ''`, 10*time.Second)
	artefact(t, phone, "page-phone-blocked")

	// Sign-out: every view's rows leave the document, not just the screen,
	// and the token is forgotten; no refresh brings anything back.
	for _, hash := range []string{"#/forgets", "#/holders/ops%40eu-west%3A1", "#/log", "#/forget/" + w.alice} {
		run(t, ctx, chromedp.Navigate(s.base+"/ui/"+hash))
		waitFor(t, ctx, `document.querySelector('main > section:not([hidden]) tbody tr, #log-key:not(:empty)') !== null`, 10*time.Second)
	}
	waitFor(t, ctx, `document.querySelectorAll('#forgets-table tbody tr').length > 0 && document.querySelectorAll('#holders-table tbody tr').length > 0 && document.getElementById('purges') !== null && document.getElementById('log-key').textContent !== ''`, 10*time.Second)
	logKey := eval[string](t, ctx, `document.getElementById('log-key').textContent`)
	run(t, ctx, chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("view-signin")))
	left := func() string {
		return eval[string](t, ctx, `JSON.stringify({token: sessionStorage.getItem('shredd.token'), rows: document.querySelectorAll('tbody tr, #timeline li, #counts button, #checkpoint-fields dt, #purges').length})`)
	}
	if got := left(); got != `{"token":null,"rows":0}` {
		t.Errorf("after sign-out: %s", got)
	}
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	for _, secret := range []string{w.alice, w.at, w.long, logKey, s.audit} {
		if strings.Contains(html, secret) {
			t.Errorf("after sign-out the document still holds %.40q", secret)
		}
	}
	time.Sleep(3500 * time.Millisecond) // past a refresh: none may run
	if got := left(); got != `{"token":null,"rows":0}` {
		t.Errorf("3.5 s after sign-out: %s", got)
	}
	noSidewaysScroll(t, ctx, "sign-in")
	noSidewaysScroll(t, phone, "forgets (before its sign-out)")
}

// cliDetails reads what `shredd verify` prints about an attestation's
// statement: the fields by name, then the conditions' and the residuals'
// lines as they are.
func cliDetails(out string) (fields map[string]string, lines []string) {
	fields = map[string]string{}
	section := ""
	_, details, _ := strings.Cut(out, "\n\n") // the checks, then the details
	details, _, _ = strings.Cut(details, "\n\n")
	for _, l := range strings.Split(details, "\n") {
		switch {
		case l == "conditions" || strings.HasPrefix(l, "residuals"):
			section = l
		case strings.HasPrefix(l, "  ") && section != "":
			lines = append(lines, l)
		case len(l) > 13 && l[12] == ' ':
			fields[strings.TrimSpace(l[:13])] = l[13:]
		}
	}
	return fields, lines
}

// TestVerifierOfflineAndVerdict: the verifier, from a saved copy opened
// from disk and as served. Saved, the copy is under the page's policy (an
// inline script does not run, a fetch to the server is refused) and makes
// no request but its own files; served, the page makes no request at all
// while it verifies. Its verdict on an attestation shows what `shredd
// verify` prints (forget, timeline, key evidence, artifacts, acks, every
// condition with its evidence, every residual), and on an export without a
// subject id it says the subject was left unchecked; at 1280 and 390 px
// nothing scrolls sideways.
func TestVerifierOfflineAndVerdict(t *testing.T) {
	s := startShredd(t)
	ex := "../docs/examples/"
	att := verifyCase{file: ex + "walkthrough.attestation.json", key: ex + "walkthrough.attestation.pub", subject: "alice@example.com",
		salt: "8e7f4a3e252767cd3f67684b651d58d0f8b6e5d3c06820c7710ef8e6a7dcc1da", attestationOnly: true}
	code, out := runCLI(t, att)
	if code != 0 {
		t.Fatalf("shredd verify: %d\n%s", code, out)
	}
	cliFields, cliLines := cliDetails(out)
	if len(cliFields) != 5 || len(cliLines) < 7 {
		t.Fatalf("shredd verify's details not read: %q %q\n%s", cliFields, cliLines, out)
	}
	var verdictLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "VERIFIED: ") {
			verdictLine = strings.TrimPrefix(l, "VERIFIED: ")
		}
	}

	for _, c := range []struct {
		name  string
		page  string
		width int64
	}{
		{"saved copy", offlinePage(t), 1280},
		{"served", s.base + "/ui/#/verify", 1280},
		{"served, phone", s.base + "/ui/#/verify", 390},
		{"saved copy, phone", offlinePage(t), 390},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := tab(t, c.width, 844)
			net := watchNet(ctx)
			run(t, ctx, chromedp.Navigate(c.page), chromedp.WaitVisible(chromedp.ID("view-verify")))
			if got := eval[string](t, ctx, `document.body.dataset.offline`); got != "true" {
				t.Errorf("the verifier is not in offline mode: %q", got)
			}
			saved := strings.HasPrefix(c.page, "file:")
			n := net.len()
			// verify chooses the files through the form's inputs, as a
			// person does; fill sets the subject and the salt.
			verify := func(file, key, logKey string, fill map[string]string) {
				t.Helper()
				steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(strings.Replace(c.page, "#", fmt.Sprintf("?v=%d#", time.Now().UnixNano()), 1)),
					chromedp.WaitVisible(chromedp.ID("view-verify")),
					chromedp.SetUploadFiles(chromedp.ID("v-file"), []string{abs(t, file)}), chromedp.SetUploadFiles(chromedp.ID("v-key-file"), []string{abs(t, key)})}
				if logKey != "" {
					steps = append(steps, chromedp.SetUploadFiles(chromedp.ID("v-logkey-file"), []string{abs(t, logKey)}))
				}
				for id, v := range fill {
					steps = append(steps, chromedp.SetValue(chromedp.ID(id), v))
				}
				steps = append(steps, chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)))
				run(t, ctx, steps...)
				waitFor(t, ctx, `document.getElementById('verdict').dataset.verified !== undefined`, 30*time.Second)
			}

			// An attestation: the verdict and the details of shredd verify.
			verify(att.file, att.key, "", map[string]string{"v-subject": att.subject, "v-salt": att.salt})
			verdict := eval[string](t, ctx, `document.getElementById('verdict').textContent`)
			if !strings.HasPrefix(verdict, "VERIFIED") || !strings.HasSuffix(verdict, verdictLine) {
				t.Errorf("the page says %q, shredd verify %q", verdict, verdictLine)
			}
			pageFields := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#details-fields dd')].map(d => [d.dataset.field, d.textContent]))`)
			for k, v := range cliFields {
				if pageFields[k] != v {
					t.Errorf("%s: the page shows %q, shredd verify %q", k, pageFields[k], v)
				}
			}
			pageLines := eval[[]string](t, ctx, `[...document.querySelectorAll('#details-conditions tbody tr')].map(r => [...r.cells].map(c => c.textContent))
				.map(([n, s, e]) => '  ' + n.padEnd(21) + ' ' + s.padEnd(8) + ' ' + e)
				.concat([...document.querySelectorAll('#details-residuals tbody tr')].map(r => '  ' + r.cells[0].textContent.padEnd(21) + ' ' + r.cells[1].textContent))`)
			if strings.Join(pageLines, "\n") != strings.Join(cliLines, "\n") {
				t.Errorf("conditions and residuals:\npage:\n%s\nshredd verify:\n%s", strings.Join(pageLines, "\n"), strings.Join(cliLines, "\n"))
			}
			noSidewaysScroll(t, ctx, "the verdict on an attestation")
			if c.width == 390 {
				run(t, ctx, chromedp.ScrollIntoView(chromedp.ID("verify-details")))
				artefact(t, ctx, "page-phone-verify-details-"+map[bool]string{true: "saved", false: "served"}[saved])
			}

			// An export without a subject: verified, the subject unchecked,
			// and the verdict says so; with one, it does not.
			exp := map[string]string{}
			logKey := ex + "walkthrough.export.log.vkey"
			verify(ex+"walkthrough.export.tar.gz", ex+"walkthrough.export.attestation.pub", logKey, exp)
			verdict = eval[string](t, ctx, `document.getElementById('verdict').textContent`)
			if eval[string](t, ctx, `document.getElementById('verdict').dataset.subject`) != "unchecked" || !strings.HasPrefix(verdict, "VERIFIED") ||
				!strings.Contains(verdict, "The subject was not checked") {
				t.Errorf("an export without a subject: %q", verdict)
			}
			noSidewaysScroll(t, ctx, "the verdict on an export")
			exp["v-subject"], exp["v-salt"] = "alice@example.com", "378253bbfad50c6fb0483662fd60ff3bfbde5304b67d0a7a595102e24aa7e307"
			verify(ex+"walkthrough.export.tar.gz", ex+"walkthrough.export.attestation.pub", logKey, exp)
			verdict = eval[string](t, ctx, `document.getElementById('verdict').textContent`)
			if eval[string](t, ctx, `document.getElementById('verdict').dataset.subject`) != "checked" || strings.Contains(verdict, "not checked") {
				t.Errorf("an export with its subject: %q", verdict)
			}
			if !saved {
				run(t, ctx, chromedp.ScrollIntoView(chromedp.ID("verdict")))
				artefact(t, ctx, fmt.Sprintf("page-verify-export-%d", c.width))
			}

			// No request left the page while it verified: from disk only
			// its own files, served only the loads of the page itself.
			for _, r := range net.since(n) {
				u, _ := url.Parse(r.url)
				own := saved && u.Scheme == "file" || !saved && strings.HasPrefix(r.url, s.base+"/ui/") && !strings.Contains(u.Path, "/v1/")
				if !own || r.auth {
					t.Errorf("a request left the page while it verified: %s (token sent: %v)", r.url, r.auth)
				}
			}
			if saved {
				// The saved copy is held to the page's policy: no inline
				// script runs, no connection is allowed.
				if ran := eval[bool](t, ctx, `(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = true'; document.head.append(s); return window.__inline === true; })()`); ran {
					t.Error("an inline script ran in the saved copy: it has no policy")
				}
				got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(`+fmt.Sprintf("%q", s.base+"/v1/log/key")+`).then(() => 'sent', (e) => 'refused')`, chromedp.EvalAwaitPromise))
				if err != nil || got != "refused" {
					t.Errorf("the saved copy's fetch to the server: %s %v", got, err)
				}
			}
		})
	}
}
