package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/shredd/shredd"
)

const tokenKey ctxKey = 1

// tokenOf returns the authenticated token of a request (nil on routes
// without authentication).
func tokenOf(ctx context.Context) *shredd.Token {
	t, _ := ctx.Value(tokenKey).(*shredd.Token)
	return t
}

// authenticate checks the bearer token of every /v1 request: 401 when it is
// missing, unknown, expired or revoked.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || raw == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shredd"`)
			s.fail(w, r, &problemError{status: http.StatusUnauthorized, code: "unauthenticated", title: "A bearer token is required"})
			return
		}
		t, err := s.tokens.Authenticate(r.Context(), raw)
		if errors.Is(err, shredd.ErrTokenInvalid) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shredd", error="invalid_token"`)
			s.fail(w, r, &problemError{status: http.StatusUnauthorized, code: "invalid_token", title: "The bearer token is unknown, expired or revoked"})
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey, t)))
	})
}

// require lets a request through when its token holds any of the scopes
// (admin holds them all); otherwise 403.
func (s *Server) require(scopes ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := tokenOf(r.Context())
			for _, sc := range scopes {
				if t != nil && t.Has(sc) {
					next.ServeHTTP(w, r)
					return
				}
			}
			s.fail(w, r, &problemError{status: http.StatusForbidden, code: "forbidden", title: "The token lacks the scope for this call",
				detail: "this call needs one of the scopes: " + strings.Join(scopes, ", ")})
		})
	}
}

// actAs returns the holder a request acts as: a token bound to a holder acts
// only as that holder (a request naming another one is refused with 403); an
// unbound token acts as the holder the request names.
func actAs(ctx context.Context, named string) (string, error) {
	t := tokenOf(ctx)
	if t == nil || t.Holder == "" {
		return named, nil
	}
	if named != "" && named != t.Holder {
		return "", &problemError{status: http.StatusForbidden, code: "wrong_holder", title: "The token acts for another holder",
			detail: "this token may act only as its own holder"}
	}
	return t.Holder, nil
}
