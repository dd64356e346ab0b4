package main

// End-to-end tests of `shredd verify` and `shredd keygen`: attestations
// built with package attest under a fixed key, checked by the real binary.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// e2eKey is the fixed, test-only attestation key of these tests.
func e2eKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("shredd/cmd/shredd/e2e/" + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

const e2eSubject = "carol@example.com"

func e2eSalt() []byte {
	s := sha256.Sum256([]byte("shredd/cmd/shredd/e2e/salt"))
	return s[:]
}

// e2eStatement is an erased forget on the local root store.
func e2eStatement() attest.Statement {
	t0 := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	var conds []attest.Condition
	for _, name := range attest.Conditions() {
		conds = append(conds, attest.Condition{Name: name, Status: attest.StatusOK, Evidence: "proven by the e2e fixture"})
	}
	return attest.NewStatement(attest.Commit(e2eSubject, e2eSalt()), attest.Predicate{
		Forget: "00112233445566778899aabbccddeeff",
		Claim:  attest.Claim,
		Timeline: attest.Timeline{Requested: t0, Committed: t0.Add(time.Millisecond),
			Shredded: t0.Add(time.Minute), Erased: t0.Add(2 * time.Minute)},
		KeyEvidence: attest.KeyEvidence{RootStore: attest.RootStoreLocal, RetiredRootVersions: []int{1}, Epoch: 1},
		Artifacts: []attest.Artifact{
			{ID: "ffeeddccbbaa99887766554433221100", Kind: "episodic", ClosedBy: attest.ClosedSealedKeyDestroyed},
		},
		Conditions: conds,
		Residuals:  []attest.Residual{{Kind: attest.ResidualRootStoreSnapshots, Description: "backups of the data directory from before the epoch"}},
	})
}

// signE2E signs st with key, through attest.Sign when it validates and by
// hand (PAE and ed25519) otherwise, as a faulty signer could.
func signE2E(t *testing.T, st attest.Statement, key ed25519.PrivateKey) []byte {
	t.Helper()
	env, err := attest.Sign(st, key)
	if err != nil {
		payload, merr := st.Marshal()
		if merr != nil {
			t.Fatal(merr)
		}
		env = attest.Envelope{PayloadType: attest.PayloadType, Payload: payload, Signatures: []attest.Signature{{
			KeyID: attest.KeyID(key.Public().(ed25519.PublicKey)),
			Sig:   ed25519.Sign(key, attest.PAE(attest.PayloadType, payload)),
		}}}
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func writeTestFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pubFile(t *testing.T, dir, name string, key ed25519.PrivateKey) string {
	t.Helper()
	b, err := attest.MarshalPublicKey(key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return writeTestFile(t, dir, name, b)
}

// runShredd runs the binary and returns its exit code and output.
func runShredd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(shreddBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("shredd %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

func TestVerifyE2E(t *testing.T) {
	dir := t.TempDir()
	key := e2eKey("attestation-key")
	pub := pubFile(t, dir, "attestation.pub", key)
	otherPub := pubFile(t, dir, "other.pub", e2eKey("other-key"))
	saltHex := hex.EncodeToString(e2eSalt())

	good := signE2E(t, e2eStatement(), key)
	goodFile := writeTestFile(t, dir, "good.json", good)

	// Tampered: the payload changed (one more second of erasure), the
	// signature kept.
	var env attest.Envelope
	if err := json.Unmarshal(good, &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = bytes.Replace(env.Payload, []byte(`12:02:00Z`), []byte(`12:02:01Z`), 1)
	tampered, _ := json.Marshal(env)
	tamperedFile := writeTestFile(t, dir, "tampered.json", tampered)

	pending := e2eStatement()
	pending.Predicate.Conditions[1] = attest.Condition{Name: attest.CondWorkersQuiesced, Status: attest.StatusPending,
		Evidence: "lease 7 on artifact ffeeddcc... is live until 12:30"}
	pendingFile := writeTestFile(t, dir, "pending.json", signE2E(t, pending, key))

	pretty := new(bytes.Buffer)
	json.Indent(pretty, good, "", "  ")
	prettyFile := writeTestFile(t, dir, "pretty.json", pretty.Bytes())
	subjectFile := writeTestFile(t, dir, "subject.txt", []byte(e2eSubject+"\n"))
	saltFile := writeTestFile(t, dir, "salt.txt", []byte(saltHex+"\n"))

	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"good", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex}, 0,
			[]string{"ok    signature", "ok    subject", "VERIFIED: the subject's data was cryptographically erased", "backups_epoch"}},
		{"flags first", []string{"--key", pub, "--subject", e2eSubject, "--salt", saltHex, goodFile}, 0, []string{"VERIFIED"}},
		{"subject and salt from files", []string{goodFile, "--key", pub, "--subject-file", subjectFile, "--salt-file", saltFile}, 0, []string{"VERIFIED"}},
		{"pretty-printed", []string{prettyFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex}, 0, []string{"VERIFIED"}},
		{"wrong subject", []string{goodFile, "--key", pub, "--subject", "carol@example.org", "--salt", saltHex}, 1,
			[]string{"ok    signature", "FAIL  subject.mismatch", "NOT VERIFIED: subject.mismatch"}},
		{"wrong salt", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", strings.Repeat("ab", 32)}, 1,
			[]string{"FAIL  subject.mismatch", "NOT VERIFIED: subject.mismatch"}},
		{"wrong key", []string{goodFile, "--key", otherPub, "--subject", e2eSubject, "--salt", saltHex}, 1,
			[]string{"FAIL  envelope.signature", "not signed by the key", "NOT VERIFIED: envelope.signature"}},
		{"tampered payload", []string{tamperedFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex}, 1,
			[]string{"FAIL  envelope.signature", "NOT VERIFIED: envelope.signature"}},
		{"pending condition", []string{pendingFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex}, 1,
			[]string{"FAIL  statement.conditions", "workers_quiesced", "pending", "NOT VERIFIED: statement.conditions"}},
		{"key file not a key", []string{goodFile, "--key", goodFile, "--subject", e2eSubject, "--salt", saltHex}, 1,
			[]string{"FAIL  key.format", "NOT VERIFIED: key.format"}},
		{"salt with a space", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex + " "}, 2, nil},
		{"the golden attestation of package attest", []string{"../../attest/testdata/vault.dsse.json", "--key", "../../attest/testdata/attestation.pub",
			"--subject", "alice@example.com", "--salt", "0bb4d8374d7971cab11d6ac8a2ca8aed25c71e4bf8b888b8c834a49df951857d"}, 0, []string{"VERIFIED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runShredd(t, append([]string{"verify"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.contains {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
			if code != 0 && strings.Contains(stdout, "VERIFIED:") && !strings.Contains(stdout, "NOT VERIFIED:") {
				t.Errorf("a failed check still says VERIFIED:\n%s", stdout)
			}
			if strings.Contains(stdout+stderr, e2eSubject) || strings.Contains(stdout+stderr, saltHex) {
				t.Errorf("the report repeats the subject id or the salt")
			}
		})
	}

	// Usage errors and unreadable inputs: exit 2, nothing checked.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no file", []string{"--key", pub, "--subject", e2eSubject, "--salt", saltHex}},
		{"two files", []string{goodFile, goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex}},
		{"no key", []string{goodFile, "--subject", e2eSubject, "--salt", saltHex}},
		{"no subject", []string{goodFile, "--key", pub, "--salt", saltHex}},
		{"no salt", []string{goodFile, "--key", pub, "--subject", e2eSubject}},
		{"salt and salt file", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex, "--salt-file", saltFile}},
		{"salt not hex", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", "zz" + saltHex[2:]}},
		{"short salt", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex[:62]}},
		{"key file missing", []string{goodFile, "--key", filepath.Join(dir, "nope.pub"), "--subject", e2eSubject, "--salt", saltHex}},
		{"attestation missing", []string{filepath.Join(dir, "nope.json"), "--key", pub, "--subject", e2eSubject, "--salt", saltHex}},
		{"unknown flag", []string{goodFile, "--key", pub, "--subject", e2eSubject, "--salt", saltHex, "--lenient"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runShredd(t, append([]string{"verify"}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if strings.Contains(stdout, "VERIFIED") {
				t.Fatalf("a usage error printed a result:\n%s", stdout)
			}
		})
	}
}

func TestKeygenE2E(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	code, stdout, stderr := runShredd(t, "keygen", "--out", dir)
	if code != 0 {
		t.Fatalf("keygen: exit %d\n%s%s", code, stdout, stderr)
	}
	keyPath, pubPath := filepath.Join(dir, node.AttestationKeyFile), filepath.Join(dir, node.AttestationPubFile)
	for path, mode := range map[string]os.FileMode{keyPath: 0o600, pubPath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^mode != 0 || (path == keyPath && got != 0o600) {
			t.Errorf("%s: mode %04o, want %04o", path, got, mode)
		}
	}
	keyPEM, _ := os.ReadFile(keyPath)
	pubPEM, _ := os.ReadFile(pubPath)
	key, err := attest.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := attest.ParsePublicKey(pubPEM)
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("the public key file does not match the private key: %v", err)
	}
	if !strings.Contains(stdout, attest.KeyID(pub)) {
		t.Errorf("keygen does not print the key id:\n%s", stdout)
	}

	// It never overwrites, not even one of the two files.
	if code, _, stderr := runShredd(t, "keygen", "--out", dir); code != 1 || !strings.Contains(stderr, "refusing to overwrite") {
		t.Fatalf("second keygen: exit %d, %s", code, stderr)
	}
	os.Remove(pubPath)
	if code, _, _ := runShredd(t, "keygen", "--out", dir); code != 1 {
		t.Fatalf("keygen over an existing private key: exit %d", code)
	}
	if b, _ := os.ReadFile(keyPath); !bytes.Equal(b, keyPEM) {
		t.Fatal("keygen changed an existing private key")
	}
	if code, _, _ := runShredd(t, "keygen", "extra"); code != 2 {
		t.Fatalf("keygen with an argument: exit %d, want 2", code)
	}

	// An attestation signed with the new key verifies under its public file.
	restored, _, err := node.LoadOrCreateAttestationKey(dir) // writes attestation.pub again
	if err != nil || !restored.Equal(key) {
		t.Fatalf("node.LoadOrCreateAttestationKey: %v", err)
	}
	att := writeTestFile(t, t.TempDir(), "att.json", signE2E(t, e2eStatement(), key))
	if code, stdout, stderr := runShredd(t, "verify", att, "--key", pubPath, "--subject", e2eSubject, "--salt", hex.EncodeToString(e2eSalt())); code != 0 {
		t.Fatalf("verify with the generated key: exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestLoadOrCreateAttestationKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	key, created, err := node.LoadOrCreateAttestationKey(dir)
	if err != nil || !created {
		t.Fatalf("first call: created=%v, %v", created, err)
	}
	again, created, err := node.LoadOrCreateAttestationKey(dir)
	if err != nil || created || !again.Equal(key) {
		t.Fatalf("second call: created=%v, %v", created, err)
	}
	keyPath, pubPath := filepath.Join(dir, node.AttestationKeyFile), filepath.Join(dir, node.AttestationPubFile)

	// The public half is derived, so it is written again when missing.
	os.Remove(pubPath)
	if k, created, err := node.LoadOrCreateAttestationKey(dir); err != nil || created || !k.Equal(key) {
		t.Fatalf("missing public key: created=%v, %v", created, err)
	}
	if _, err := os.Stat(pubPath); err != nil {
		t.Fatal(err)
	}

	// A public key that is not the private key's.
	goodPub, _ := os.ReadFile(pubPath)
	other, _ := attest.MarshalPublicKey(e2eKey("other-key").Public().(ed25519.PublicKey))
	os.WriteFile(pubPath, other, 0o644)
	if _, _, err := node.LoadOrCreateAttestationKey(dir); err == nil {
		t.Fatal("a mismatched public key file was accepted")
	}
	os.WriteFile(pubPath, goodPub, 0o644)

	// A private key others can read.
	os.Chmod(keyPath, 0o640)
	if _, _, err := node.LoadOrCreateAttestationKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a group-readable private key: %v", err)
	}
	os.Chmod(keyPath, 0o600)

	// A public key without its private key: never replaced silently.
	keyPEM, _ := os.ReadFile(keyPath)
	os.Remove(keyPath)
	if _, _, err := node.LoadOrCreateAttestationKey(dir); err == nil {
		t.Fatal("a new key was created beside an orphaned public key")
	}
	if b, _ := os.ReadFile(pubPath); !bytes.Equal(b, goodPub) {
		t.Fatal("the orphaned public key was changed")
	}

	// A corrupt private key.
	os.WriteFile(keyPath, []byte("not a key"), 0o600)
	if _, _, err := node.LoadOrCreateAttestationKey(dir); !errors.Is(err, attest.ErrKey) {
		t.Fatalf("a corrupt private key: %v", err)
	}
	os.WriteFile(keyPath, keyPEM, 0o600)
	if k, _, err := node.LoadOrCreateAttestationKey(dir); err != nil || !k.Equal(key) {
		t.Fatalf("restored: %v", err)
	}
}

// TestExampleAttestation checks the example attestation committed under
// docs/examples with the real binary, as its README says.
func TestExampleAttestation(t *testing.T) {
	cmd := exec.Command(shreddBinary(t), "verify", "../../docs/examples/walkthrough.attestation.json",
		"--key", "../../docs/examples/walkthrough.attestation.pub", "--subject", "alice@example.com",
		"--salt", "8e7f4a3e252767cd3f67684b651d58d0f8b6e5d3c06820c7710ef8e6a7dcc1da")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("VERIFIED")) {
		t.Fatalf("the example attestation does not verify: %v\n%s", err, out)
	}
}
