package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/api"
)

// TestErrorsNetHTTPWrites pins the answers net/http writes itself, on the
// connection, before any handler runs: plain text, no X-Request-Id, and the
// connection closed. The router never sees these requests, so they cannot
// be problem+json; docs/api.md lists them. The server is configured as
// cmd/shredd serve configures it (MaxHeaderBytes 64 KiB). If a Go release
// changes one of these, this test fails and the docs need the change too.
func TestErrorsNetHTTPWrites(t *testing.T) {
	srv := httptest.NewUnstartedServer(api.New(api.Config{}).Handler())
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Start()
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()
	req := func(lines ...string) string {
		return strings.Join(lines, "\r\n") + "\r\n\r\n"
	}
	cases := []struct {
		name, request string
		status        int
	}{
		{"header over MaxHeaderBytes", req("GET /livez HTTP/1.1", "Host: "+host, "X-Big: "+strings.Repeat("a", 80<<10)), 431},
		{"Content-Length not a number", req("POST /v1/encrypt HTTP/1.1", "Host: "+host, "Content-Length: abc"), 400},
		{"two different Content-Lengths", req("POST /v1/encrypt HTTP/1.1", "Host: "+host, "Content-Length: 1", "Content-Length: 2"), 400},
		{"no Host", req("GET /livez HTTP/1.1"), 400},
		{"bad header name", req("GET /livez HTTP/1.1", "Host: "+host, "Bad Name: x"), 400},
		{"malformed request line", req("GET /livez", "Host: "+host), 400},
		{"unknown transfer coding", req("POST /v1/encrypt HTTP/1.1", "Host: "+host, "Transfer-Encoding: gzip"), 501},
		{"Expect other than 100-continue", req("GET /livez HTTP/1.1", "Host: "+host, "Expect: 200-ok"), 417},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			go io.WriteString(conn, c.request) // may fail once the server hangs up
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "problem") || resp.Header.Get("X-Request-Id") != "" {
				t.Fatalf("the router answered (Content-Type %q, X-Request-Id %q): net/http no longer writes this itself; update docs/api.md",
					ct, resp.Header.Get("X-Request-Id"))
			}
			if !resp.Close {
				t.Fatalf("the connection stays open")
			}
		})
	}
}
