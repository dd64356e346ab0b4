package api

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDoc is the hand-written OpenAPI 3.1 description of the API.
// openapi_test.go holds it to the router (every route, both ways), to the
// error codes the package emits, to the scopes the routes require, and
// replays its examples against a real server.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPIDocument returns the OpenAPI 3.1 document of the API (JSON), as
// served at GET /v1/openapi.json. The slice is a copy the caller may keep.
func OpenAPIDocument() []byte {
	return append([]byte(nil), openAPIDoc...)
}

// openAPI serves the OpenAPI document. It needs no token: the document
// holds no secret and describes only what any client may call.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc)
}
