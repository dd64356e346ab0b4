package api

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd/ui"
)

// mountUI serves the auditor page (package ui) at /ui/, GET and HEAD only,
// with no token: its files hold no secret, and every call the page makes
// goes to /v1 with the token the user signs in with. Every answer under
// /ui, the redirect, 404 (a path that is not one of its files: the
// router's no_route problem, like any unknown route) and 405 included,
// carries the page's security headers (ui.SetHeaders): an error page of
// the page's origin is no weaker than the page.
func (s *Server) mountUI(r chi.Router) {
	h, files := ui.Handler(), ui.Files()
	allowed := func(w http.ResponseWriter, r *http.Request) bool {
		ui.SetHeaders(w.Header())
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return true
		}
		w.Header().Set("Allow", "GET, HEAD")
		s.fail(w, r, &problemError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", title: "Method not allowed"})
		return false
	}
	r.HandleFunc("/ui", func(w http.ResponseWriter, r *http.Request) {
		if allowed(w, r) {
			http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
		}
	})
	r.HandleFunc(ui.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r) {
			return
		}
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
