package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/shredd/shredd/ui"
)

// TestHandlerHeaders: every file of the page is served with the strict
// Content-Security-Policy and the headers that keep it out of frames and
// referrers, sets no cookie, and only GET and HEAD are answered.
func TestHandlerHeaders(t *testing.T) {
	srv := httptest.NewServer(ui.Handler())
	defer srv.Close()
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/verify.js", "/ui/style.css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		for h, want := range map[string]string{"Content-Security-Policy": ui.ContentSecurityPolicy, "X-Frame-Options": "DENY",
			"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s: %s is %q, want %q", path, h, got, want)
			}
		}
		if len(resp.Cookies()) != 0 {
			t.Errorf("%s sets a cookie", path)
		}
	}
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ui.ContentSecurityPolicy, d) {
			t.Errorf("the policy lacks %s", d)
		}
	}
	resp, err := http.Post(srv.URL+"/ui/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}

// TestNothingFromElsewhere: the page's files name no other origin (no CDN,
// font or script from the network), use no inline script or style (the
// policy would refuse them), and no eval.
func TestNothingFromElsewhere(t *testing.T) {
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(ui.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(ui.Files(), path)
		if err != nil {
			return err
		}
		s := string(b)
		for _, m := range url.FindAllString(s, -1) {
			// Identifiers, never fetched: the SVG namespace, and the type URIs
			// of in-toto statements and shredd's predicate and log events.
			if m != "http://www.w3.org" && m != "https://in-toto.io" && m != "https://shredd.dev" {
				t.Errorf("%s names another origin: %s", path, m)
			}
		}
		for _, bad := range []string{"eval(", "new Function(", "<script>", " style=\"", "onclick=", "onload=", "innerHTML"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s uses %s", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSavedCopyCarriesThePolicy: index.html carries the served header's
// Content-Security-Policy in a <meta> before anything it loads, so a copy
// saved and opened from disk is held to the same policy: every directive
// of the header but frame-ancestors, which a <meta> cannot carry (the
// browser ignores it there), and nothing else.
func TestSavedCopyCarriesThePolicy(t *testing.T) {
	b, err := fs.ReadFile(ui.Files(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	m := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`).FindAllStringSubmatchIndex(page, -1)
	if len(m) != 1 {
		t.Fatalf("%d Content-Security-Policy metas in index.html, want 1", len(m))
	}
	if first := strings.Index(page, "<link"); first < 0 || m[0][0] > first || m[0][0] > strings.Index(page, "<script") {
		t.Error("the policy's <meta> must come before any stylesheet or script")
	}
	directives := func(policy string) map[string]string {
		out := map[string]string{}
		for _, d := range strings.Split(policy, ";") {
			f := strings.Fields(d)
			if len(f) > 0 {
				out[f[0]] = strings.Join(f[1:], " ")
			}
		}
		return out
	}
	meta, header := directives(page[m[0][2]:m[0][3]]), directives(ui.ContentSecurityPolicy)
	delete(header, "frame-ancestors")
	if len(meta) != len(header) {
		t.Errorf("the meta's policy has %d directives, the header's %d (without frame-ancestors):\n%v\n%v", len(meta), len(header), meta, header)
	}
	for name, v := range header {
		if meta[name] != v {
			t.Errorf("%s: the meta says %q, the header %q", name, meta[name], v)
		}
	}
}
