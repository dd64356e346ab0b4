// Package ui is shredd's page for auditors and privacy operators, served
// by shredd itself at /ui/ (docs/ui.md): static files embedded in the
// binary (HTML, CSS and two scripts, nothing fetched from elsewhere), a
// read-only client of the /v1 API signed in with an audit token, and an
// offline verifier of attestations and regulator exports that runs
// entirely in the browser (static/verify.js: the checks of `shredd
// verify` and its witness cosignatures, with WebCrypto). verify.js is
// generated, not written: it is the TypeScript client's reader of evidence
// (clients/typescript/src/evidence.ts) built as a classic script by
// clients/typescript/scripts/page.mjs (npm run build:page), so that the
// page and the client run one source.
//
// The package holds no state and imports no other shredd package: the
// page reaches the service only through the API, as any client does.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every file of the page: scripts,
// styles and images from the page's own origin only (no inline script or
// style, no eval), fetches only to that origin (the API), no frames, no
// plugins, no form posts anywhere, and no embedding in another site's
// frame.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Files returns the page's files (index.html, app.js, verify.js generated
// from clients/typescript/src/evidence.ts, style.css), as the handler
// serves them.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is ours
	}
	return sub
}

// SetHeaders sets the headers every answer of the page carries, its
// files and its errors alike: the Content-Security-Policy above, nosniff,
// and the headers that keep the page out of frames, caches and referrers.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	h.Set("Cache-Control", "no-cache")
}

// Handler serves the page under Prefix: GET and HEAD only, with the
// headers of SetHeaders on every answer (404 and 405 included). It sets no
// cookie: the page keeps its token in the tab's session storage and sends
// it in an Authorization header, so no request a third-party site triggers
// carries it.
func Handler() http.Handler {
	files := http.StripPrefix(Prefix, http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		files.ServeHTTP(w, r)
	})
}
