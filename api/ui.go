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
// /v1 with the token the user signs in with. A path that is not one of
// its files is the router's 404 problem, like any unknown route.
func (s *Server) mountUI(r chi.Router) {
	h, files := ui.Handler(), ui.Files()
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
	})
	r.Get(ui.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
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
