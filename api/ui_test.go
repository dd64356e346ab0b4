package api_test

import (
	"net/http"
	"testing"

	"github.com/shredd/shredd/ui"
)

// TestUIAnswersCarryThePagesHeaders: every answer under /ui, the files,
// the redirect, a 404 for a path that is no file of the page (an encoded
// traversal included) and a 405 for any method but GET and HEAD, carries
// the page's Content-Security-Policy and nosniff.
func TestUIAnswersCarryThePagesHeaders(t *testing.T) {
	e := newEnv(t, 0)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/", 200},
		{"GET", "/ui/app.js", 200},
		{"GET", "/ui/style.css", 200},
		{"GET", "/ui", 301},
		{"GET", "/ui/nope.html", 404},
		{"GET", "/ui/static/index.html", 404},
		{"GET", "/ui/%2e%2e/v1/forgets", 404},
		{"GET", "/ui/..%2fv1%2fforgets", 404},
		{"POST", "/ui/", 405},
		{"PUT", "/ui/app.js", 405},
		{"DELETE", "/ui/nope", 405},
		{"OPTIONS", "/ui/", 405},
		{"POST", "/ui", 405},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, e.srv.URL+c.path, nil)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
			for h, want := range map[string]string{"Content-Security-Policy": ui.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
				"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s is %q, want %q", h, got, want)
				}
			}
			if c.want == 405 && resp.Header.Get("Allow") != "GET" {
				t.Errorf("405 with Allow %q", resp.Header.Get("Allow"))
			}
			if c.want >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d as %q, not problem details", c.want, resp.Header.Get("Content-Type"))
			}
		})
	}
}
