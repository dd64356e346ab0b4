package attest_test

// Interoperability with OpenSSL, the verifier a regulator already has: the
// signature, the key files and the recipe of docs/attestation.md.
//
// These tests need openssl (1.1.1 or later for Ed25519 with -rawin: 3.0),
// and the recipe test also jq, xxd and sha256sum. They fail, never skip,
// when a tool is missing: the suite's environment must provide them.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shredd/shredd/attest"
)

// need returns the path of tool, failing the test when it is missing.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s not found: this test checks attestations against %s and must not be skipped; install it where the tests run (scripts/test.sh's environment)", tool, tool)
	}
	return p
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenSSLVerifies checks a signature made by Sign with
// `openssl pkeyutl -verify -rawin` over the PAE, and that OpenSSL refuses a
// changed PAE.
func TestOpenSSLVerifies(t *testing.T) {
	openssl := need(t, "openssl")
	if out, err := exec.Command(openssl, "version").CombinedOutput(); err != nil {
		t.Fatalf("openssl version: %v\n%s", err, out)
	} else {
		t.Logf("%s", bytes.TrimSpace(out))
	}
	env, err := attest.Sign(vaultStatement(t), signingKey())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, _ := attest.MarshalPublicKey(pubOf(signingKey()))
	pae := attest.PAE(env.PayloadType, env.Payload)
	bad := bytes.Clone(pae)
	bad[len(bad)-2] ^= 1
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"pub.pem": pubPEM, "pae.bin": pae, "bad.bin": bad, "sig.bin": env.Signatures[0].Sig})
	verify := func(in string) ([]byte, error) {
		cmd := exec.Command(openssl, "pkeyutl", "-verify", "-pubin", "-inkey", "pub.pem", "-rawin", "-in", in, "-sigfile", "sig.bin")
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if out, err := verify("pae.bin"); err != nil || !bytes.Contains(out, []byte("Signature Verified Successfully")) {
		t.Fatalf("OpenSSL does not verify the attestation's signature: %v\n%s", err, out)
	}
	if out, err := verify("bad.bin"); err == nil {
		t.Fatalf("OpenSSL verifies a changed PAE:\n%s", out)
	}
}

// TestOpenSSLSigns goes the other way: OpenSSL signs the PAE with the
// private key file MarshalPrivateKey wrote, and Open accepts the envelope.
func TestOpenSSLSigns(t *testing.T) {
	openssl := need(t, "openssl")
	st := vaultStatement(t)
	payload, _ := st.Marshal()
	privPEM, _ := attest.MarshalPrivateKey(signingKey())
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"key.pem": privPEM, "pae.bin": attest.PAE(attest.PayloadType, payload)})
	cmd := exec.Command(openssl, "pkeyutl", "-sign", "-inkey", "key.pem", "-rawin", "-in", "pae.bin", "-out", "sig.bin")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl pkeyutl -sign: %v\n%s", err, out)
	}
	sig := readFile(t, filepath.Join(dir, "sig.bin"))
	b, _ := json.Marshal(attest.Envelope{PayloadType: attest.PayloadType, Payload: payload,
		Signatures: []attest.Signature{{KeyID: attest.KeyID(pubOf(signingKey())), Sig: sig}}})
	if _, err := attest.Open(b, pubOf(signingKey())); err != nil {
		t.Fatalf("Open of the envelope OpenSSL signed: %v", err)
	}
	// OpenSSL reads the public key file and derives the same key.
	cmd = exec.Command(openssl, "pkey", "-in", "key.pem", "-pubout")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if pub, err := attest.ParsePublicKey(out); err != nil || !pub.Equal(pubOf(signingKey())) {
		t.Fatalf("OpenSSL's public key: %v", err)
	}
}

const docsPath = "../docs/attestation.md"

// recipe returns the shell block of docs/attestation.md marked
// <!-- recipe: openssl -->.
func recipe(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile("(?s)<!-- recipe: openssl -->\\s*```sh\n(.*?)```").FindSubmatch(readFile(t, docsPath))
	if m == nil {
		t.Fatalf("%s: no ```sh block after <!-- recipe: openssl -->", docsPath)
	}
	return string(m[1])
}

// TestDocsRecipe runs the OpenSSL recipe of docs/attestation.md, as
// written there, on the golden attestation: it must verify with the right
// inputs, and say nothing is ok with a wrong subject or key.
func TestDocsRecipe(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "jq", "xxd", "sha256sum", "base64"} {
		need(t, tool)
	}
	script := recipe(t)
	check := readCheck(t, "vault")
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	otherPEM, _ := attest.MarshalPublicKey(pubOf(otherKey()))
	other := filepath.Join(t.TempDir(), "other.pub")
	writeFiles(t, filepath.Dir(other), map[string][]byte{"other.pub": otherPEM})
	run := func(pub, subject, salt string) string {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "ATT="+abs("testdata/vault.dsse.json"), "PUB="+pub, "SUBJECT="+subject, "SALT="+salt)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	pub := abs("testdata/attestation.pub")
	out := run(pub, check["subject"], check["salt"])
	for _, want := range []string{"Signature Verified Successfully", "key id ok", "commitment ok", `"claim": "cryptographically erased"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the recipe's output lacks %q:\n%s", want, out)
		}
	}
	if out := run(pub, "mallory@example.com", check["salt"]); strings.Contains(out, "commitment ok") {
		t.Fatalf("wrong subject, the recipe says the commitment is ok:\n%s", out)
	}
	if out := run(pub, check["subject"], hex.EncodeToString(attest.NewSalt())); strings.Contains(out, "commitment ok") {
		t.Fatalf("wrong salt, the recipe says the commitment is ok:\n%s", out)
	}
	if out := run(other, check["subject"], check["salt"]); strings.Contains(out, "Verified Successfully") || strings.Contains(out, "key id ok") {
		t.Fatalf("wrong key, the recipe says it verifies:\n%s", out)
	}
}

// TestDocsExample checks that docs/attestation.md shows the golden
// statement as it is; -update rewrites the example there too.
func TestDocsExample(t *testing.T) {
	doc := readFile(t, docsPath)
	want := goldenFiles(t)["vault.statement.json"]
	re := regexp.MustCompile("(?s)(<!-- golden: attest/testdata/vault.statement.json -->\\s*```json\n)(.*?)(```)")
	m := re.FindSubmatchIndex(doc)
	if m == nil {
		t.Fatalf("%s: no ```json block after <!-- golden: attest/testdata/vault.statement.json -->", docsPath)
	}
	if bytes.Equal(doc[m[4]:m[5]], want) {
		return
	}
	if !*update {
		t.Fatalf("%s: the example differs from attest/testdata/vault.statement.json; run go test ./attest -update", docsPath)
	}
	out := append(append(bytes.Clone(doc[:m[4]]), want...), doc[m[5]:]...)
	if err := os.WriteFile(docsPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
