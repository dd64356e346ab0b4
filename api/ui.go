package api

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd/ui"
)

// mountUI serves the auditor page (package ui) at /ui/, GET only, with no
// token: its files hold no secret, and every call the page makes goes to
// /v1 with the token the user signs in with. Every answer under /ui, the
// redirect and a 404 (a path that is not one of its files: the router's
// no_route problem, like any unknown route) included, carries the page's
// security headers (ui.SetHeaders), and so does the router's 405 for
// another method there (uiPath): an error page of the page's origin is no
// weaker than the page.
func (s *Server) mountUI(r chi.Router) {
	h, files := ui.Handler(), ui.Files()
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
		ui.SetHeaders(w.Header())
		http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
	})
	r.Get(ui.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
		ui.SetHeaders(w.Header())
		name := strings.TrimPrefix(r.URL.Path, ui.Prefix)
		if name == "" {
			name = "index.html"
		}
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() || !fs.ValidPath(name) {
			s.fail(w, r, &problemError{status: http.StatusNotFound, code: "no_route", title: "No such route"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// uiPath reports whether path is the page's (/ui or under /ui/).
func uiPath(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, ui.Prefix)
}
