package api

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadRawGrowsWithTheBody checks the buffer readRaw reads a raw body
// into: a body that announces 64 MiB and sends a few bytes gets a buffer of
// at most rawPoolMax (a pooled one) instead of the 64 MiB announced; bodies
// of every size come back intact, with or without a Content-Length; over
// the limit is still 413.
func TestReadRawGrowsWithTheBody(t *testing.T) {
	s := New(Config{})
	read := func(body io.Reader, n int64) ([]byte, error) {
		r := httptest.NewRequest("POST", "/v1/encrypt/raw", body)
		r.ContentLength = n
		r.Header.Set("Content-Type", "application/octet-stream")
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, s.maxRaw)
		return s.readRaw(r)
	}

	b, err := read(strings.NewReader("abc"), 64<<20)
	if err != nil || string(b) != "abc" {
		t.Fatalf("short body: %q, %v", b, err)
	}
	if cap(b) > rawPoolMax {
		t.Fatalf("a body announcing 64 MiB and sending 3 bytes got a buffer of %d bytes", cap(b))
	}
	putRaw(b, true)

	for _, size := range []int{0, 1, rawStartCap - 1, rawStartCap, rawStartCap + 1, 3<<20 + 17, rawPoolMax + 5} {
		want := make([]byte, size)
		rand.Read(want)
		for _, n := range []int64{int64(size), -1} {
			got, err := read(bytes.NewReader(want), n)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("body of %d bytes (Content-Length %d): %d bytes back, %v", size, n, len(got), err)
			}
			if n >= 0 && cap(got) > max(size+1, rawPoolMax) {
				t.Fatalf("body of %d bytes: a buffer of %d", size, cap(got))
			}
			putRaw(got, true)
		}
	}

	s.maxRaw = 1 << 20
	_, err = read(bytes.NewReader(make([]byte, 1<<20+1)), -1)
	var pe *problemError
	if !errors.As(err, &pe) || pe.status != http.StatusRequestEntityTooLarge || pe.code != "body_too_large" {
		t.Fatalf("body over the limit: %v", err)
	}
}
