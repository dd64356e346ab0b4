package attest_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredd/shredd/attest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (go test ./attest -update)")

// golden is one golden attestation: NAME.dsse.json (the attestation file),
// NAME.statement.json (its payload, indented, for reading) and NAME.check
// (the subject id and salt that open its commitment), all under the test
// key testdata/attestation.pub.
type golden struct {
	name, subject string
	statement     func(testing.TB) attest.Statement
}

var goldens = []golden{
	{"vault", testSubject, vaultStatement},
	{"local", "bob", localStatement},
}

// goldenFiles returns the files of the golden attestations, by name.
func goldenFiles(t testing.TB) map[string][]byte {
	t.Helper()
	pubPEM, err := attest.MarshalPublicKey(pubOf(signingKey()))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"attestation.pub": pubPEM}
	for _, g := range goldens {
		env, err := attest.Sign(g.statement(t), signingKey())
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		files[g.name+".dsse.json"] = append(b, '\n')
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, env.Payload, "", "  "); err != nil {
			t.Fatal(err)
		}
		files[g.name+".statement.json"] = append(pretty.Bytes(), '\n')
		files[g.name+".check"] = []byte("key: attestation.pub\nsubject: " + g.subject + "\nsalt: " + hex.EncodeToString(testSalt()) + "\n")
	}
	return files
}

// TestGolden checks the files under testdata against what Sign makes from
// the fixed key, salt and times today (Ed25519 signatures are
// deterministic), and that each opens. With -update it rewrites them.
func TestGolden(t *testing.T) {
	for name, want := range goldenFiles(t) {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./attest -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the code produces now; if the change is intended, run go test ./attest -update and review the diff", path)
		}
	}
	pub, err := attest.ParsePublicKey(readFile(t, "testdata/attestation.pub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		st, err := attest.Open(readFile(t, filepath.Join("testdata", g.name+".dsse.json")), pub)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		check := readCheck(t, g.name)
		salt, err := attest.ParseSalt(check["salt"])
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CheckSubject(check["subject"], salt); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readCheck reads testdata/NAME.check: "key: value" lines.
func readCheck(t testing.TB, name string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(readFile(t, filepath.Join("testdata", name+".check")))), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s.check: line %q", name, line)
		}
		m[k] = v
	}
	return m
}
