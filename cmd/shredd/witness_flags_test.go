package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shredd/shredd/translog"
)

// TestWitnessFlags: serve's --witness takes URL=VKEY (the key or a file),
// SHREDD_WITNESS space-separated when no flag is given, and refuses what
// it cannot use, naming it.
func TestWitnessFlags(t *testing.T) {
	_, k1, _ := translog.GenerateCosignerKey("w1.example")
	_, k2, _ := translog.GenerateCosignerKey("w2.example")
	_, logKey, _ := translog.GenerateKey("shredd/x")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SHREDD_WITNESS" {
				return v
			}
			return ""
		}
	}
	var stderr bytes.Buffer
	p, err := ParseFlags(nil, &stderr, env("http://127.0.0.1:1="+k1+" https://w2.example/sub="+k2))
	if err != nil || len(p.witnessTargets) != 2 || p.witnessTargets[1].URL != "https://w2.example/sub" || p.witnessTargets[1].Key.Name() != "w2.example" {
		t.Fatalf("from SHREDD_WITNESS: %v %+v %s", err, p, stderr.String())
	}
	p, err = ParseFlags([]string{"--witness", "http://127.0.0.1:2=" + k2}, &stderr, env("http://127.0.0.1:1="+k1))
	if err != nil || len(p.witnessTargets) != 1 || p.witnessTargets[0].Key.Name() != "w2.example" {
		t.Fatalf("the flag over the environment: %v %+v", err, p)
	}
	for _, bad := range []struct{ arg, want string }{
		{"http://127.0.0.1:1", "want URL=VKEY"},
		{"ftp://x=" + k1, "http:// or https://"},
		{"http://user:pw@x=" + k1, "no credentials"},
		{"http://x=" + logKey, "not a cosignature/v1"},
		{"http://x=/no/such/file", "no such file, and not a key"},
	} {
		stderr.Reset()
		if _, err := ParseFlags([]string{"--witness", bad.arg}, &stderr, env("")); err == nil || !strings.Contains(stderr.String(), bad.want) {
			t.Errorf("--witness %s: %v, stderr %q, want %q", bad.arg, err, stderr.String(), bad.want)
		}
		if strings.Contains(stderr.String(), "pw@") {
			t.Errorf("a password in a URL is echoed: %s", stderr.String())
		}
	}
}
