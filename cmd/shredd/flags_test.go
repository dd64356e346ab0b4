package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestParseFlagsEnvironment: every flag of shredd serve takes its default
// from SHREDD_<FLAG>, a flag on the command line wins, and a variable that
// does not parse is refused by name instead of being replaced by the
// default.
func TestParseFlagsEnvironment(t *testing.T) {
	envOf := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	var stderr bytes.Buffer
	p, err := ParseFlags(nil, &stderr, envOf("SHREDD_MAX_BODY", "4096", "SHREDD_MAX_RAW_BODY", "8192",
		"SHREDD_BUCKETS", "64", "SHREDD_CACHE_TTL", "5s"))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if p.MaxBody != 4096 || p.MaxRawBody != 8192 || p.Buckets != 64 || p.CacheTTL != 5*time.Second {
		t.Fatalf("from the environment: max-body %d, max-raw-body %d, buckets %d, cache-ttl %v", p.MaxBody, p.MaxRawBody, p.Buckets, p.CacheTTL)
	}
	p, err = ParseFlags([]string{"--max-body", "2048", "--buckets", "8"}, &stderr, envOf("SHREDD_MAX_BODY", "4096", "SHREDD_BUCKETS", "64"))
	if err != nil || p.MaxBody != 2048 || p.Buckets != 8 {
		t.Fatalf("flags over the environment: %+v, %v", p, err)
	}
	for _, tc := range [][2]string{
		{"SHREDD_MAX_BODY", "1MiB"},
		{"SHREDD_BUCKETS", "many"},
		{"SHREDD_CACHE_TTL", "30"},
		{"SHREDD_MAX_BODY", "100"}, // parses, but under the minimum
	} {
		stderr.Reset()
		if _, err := ParseFlags(nil, &stderr, envOf(tc[0], tc[1])); err == nil {
			t.Fatalf("%s=%s accepted", tc[0], tc[1])
		}
		if !strings.Contains(stderr.String(), tc[0]) && !strings.Contains(stderr.String(), "--max-body") {
			t.Fatalf("%s=%s refused without naming it: %s", tc[0], tc[1], stderr.String())
		}
	}
}
