package testkeys_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/testkit/testbin"
)

const module = "github.com/shredd/shredd"

// commands are the binaries the project ships: none may hold a test key.
var commands = []string{module + "/cmd/shredd", module + "/cmd/shredd-bench"}

// testOnly returns the packages of deps that must never reach a shipped
// binary: testkeys and every test kit under testkit/.
func testOnly(deps []string) []string {
	var bad []string
	for _, p := range deps {
		if p == module+"/testkeys" || strings.HasPrefix(p, module+"/testkit/") {
			bad = append(bad, p)
		}
	}
	return bad
}

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestNotInBinaryDeps: neither command depends on testkeys or a test kit.
// The same check of a package known to use testkeys (the vector
// generator) must find it, so the check is shown able to fail.
func TestNotInBinaryDeps(t *testing.T) {
	for _, cmd := range commands {
		if bad := testOnly(deps(t, cmd)); len(bad) > 0 {
			t.Errorf("%s depends on test-only packages %v: the test keys are public and must never be in a shipped binary", cmd, bad)
		}
	}
	if bad := testOnly(deps(t, module+"/testkit/vectorgen")); !strings.Contains(strings.Join(bad, " "), module+"/testkeys") {
		t.Errorf("the check does not see testkeys among testkit/vectorgen's dependencies (found %v): it could not fail", bad)
	}
}

// needles are what a binary linking testkeys would hold: its labels (string
// constants) and, in case a key were ever computed at build time or
// copied into the code, the bytes of some of its keys and ids, raw, in hex
// and in base64. (LogOrigin and LogKey's verifier key are not needles: the
// OpenAPI examples the server embeds publish them on purpose.)
func needles() map[string][]byte {
	n := map[string][]byte{
		"a label of testkeys": []byte("shredd/testkeys/"),
		"the seed of LogKey":  []byte("api test log key"),
	}
	sid := testkeys.SID(0)
	for name, b := range map[string][]byte{
		"SubjectKey(0)":            testkeys.SubjectKey(0),
		"SID(0)":                   sid[:],
		"AttestationKey(0)'s seed": testkeys.AttestationKey(0).Seed(),
	} {
		n[name] = b
		n[name+" in hex"] = []byte(hex.EncodeToString(b))
		n[name+" in base64"] = []byte(base64.RawStdEncoding.EncodeToString(b))
		n[name+" in base64url"] = []byte(base64.RawURLEncoding.EncodeToString(b))
	}
	return n
}

// TestNotInBinaryBytes builds cmd/shredd and searches it for the test
// keys' labels and bytes. The same search of the vector generator, a
// command that does link testkeys, must find them, so the search is shown
// able to fail.
func TestNotInBinaryBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/shredd")
	}
	if found := held(t, module+"/testkit/vectorgen"); len(found) == 0 {
		t.Fatalf("the search finds nothing of testkeys in testkit/vectorgen's binary, which links it: it could not fail")
	}
	if found := held(t, module+"/cmd/shredd"); len(found) > 0 {
		t.Errorf("the shredd binary holds %v of package testkeys: the test keys are public and must never be in a shipped binary", found)
	}
}

// held builds the command pkg and returns the names of the needles its
// executable holds.
func held(t *testing.T, pkg string) []string {
	t.Helper()
	path, err := testbin.Build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for name, b := range needles() {
		if bytes.Contains(bin, b) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}
