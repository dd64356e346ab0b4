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

// A raw buffer is of the smallest class that holds what it is taken for:
// a body of 2^k bytes and the byte of the read that meets EOF, or the
// envelope of a 2^k-byte plaintext, fit the 2^k class; beyond the largest
// class a buffer is made to measure. A 1 MiB body is read into a buffer of
// the 1 MiB class, whatever buffers the pool holds.
func TestRawClasses(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int64
	}{
		{0, 1<<18 + rawClassSlack}, {1<<18 + 1, 1<<18 + rawClassSlack}, {1<<18 + rawClassSlack + 1, 1<<19 + rawClassSlack},
		{1<<20 + 1, 1<<20 + rawClassSlack}, {1<<20 + 64<<10, 1<<20 + rawClassSlack}, {1<<20 + 64<<10 + 1, 1<<21 + rawClassSlack},
		{rawPoolMax, rawPoolMax}, {rawPoolMax + 1, rawPoolMax + 1},
	} {
		b := getRaw(tc.n)
		if int64(cap(b)) != tc.want || len(b) != 0 {
			t.Errorf("getRaw(%d): len %d cap %d, want cap %d", tc.n, len(b), cap(b), tc.want)
		}
		putRaw(b, false)
	}
	// Fill the pools with buffers of every class, as growth leaves them.
	for i := range rawPools {
		for range 4 {
			putRaw(make([]byte, 0, rawClassCap(i)), false)
		}
	}
	s := New(Config{})
	body := make([]byte, 1<<20)
	rand.Read(body)
	r := httptest.NewRequest("POST", "/v1/encrypt/raw", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/octet-stream")
	got, err := s.readRaw(r)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a 1 MiB body: %d bytes, %v", len(got), err)
	}
	if cap(got) != 1<<20+rawClassSlack {
		t.Fatalf("a 1 MiB body in a buffer of %d bytes, want the 1 MiB class's %d", cap(got), 1<<20+rawClassSlack)
	}
	putRaw(got, true)
}
