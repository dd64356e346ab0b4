package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeSelfSigned writes a certificate for 127.0.0.1 and its key, and
// returns their paths and a pool trusting the certificate.
func writeSelfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shredd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestTLS serves HTTPS with --tls-cert/--tls-key: a client trusting the
// certificate gets through, plain HTTP does not.
func TestTLS(t *testing.T) {
	certPath, keyPath, pool := writeSelfSigned(t, t.TempDir())
	s := startServer(t, t.TempDir(), serverOpts{Args: []string{"--tls-cert", certPath, "--tls-key", keyPath}})
	addr := strings.TrimPrefix(s.base, "http://")
	s.base = "https://" + addr
	s.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	s.putKinds(t, "episodic")
	rec := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "over tls", "")
	s.open(t, rec)
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS port")
		}
	}
}

// TestRefusesPlainHTTPOffLoopback: without TLS, a non-loopback address is
// refused unless --allow-remote-http says a TLS proxy is in front.
func TestRefusesPlainHTTPOffLoopback(t *testing.T) {
	cmd := exec.Command(shreddBinary(t), "serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("refusing plain HTTP on non-loopback address")) {
		t.Fatalf("shredd on 0.0.0.0 without TLS: err %v, output:\n%s", err, out)
	}
	cmd = exec.Command(shreddBinary(t), "serve", "--tls-cert", "x.pem")
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("--tls-cert and --tls-key go together")) {
		t.Fatalf("--tls-cert alone: err %v, output:\n%s", err, out)
	}
}

// TestTokenCLI creates, uses, lists and revokes a holder-bound token with
// the CLI while the server runs.
func TestTokenCLI(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic")
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(shreddBinary(t), append([]string{"token"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, msg, err := run("create", "--data-dir", dir, "--name", "writer", "--scopes", "encrypt,register", "--holder", "agent-7")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, msg)
	}
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, "shredd_") || strings.Contains(msg, tok) {
		t.Fatalf("token create printed %q (stderr %q)", out, msg)
	}
	id := strings.Fields(strings.TrimPrefix(msg, "created token "))[0]

	enc := sealReq{Subject: "alice@example.com", Kind: "episodic", Plaintext: "dGVh"}
	if r, err := s.callToken("POST", "/v1/encrypt", tok, enc); err != nil || r.Status != 200 {
		t.Fatalf("encrypt with the writer token: %v %d %s", err, r.Status, r.Body)
	}
	if r, _ := s.callToken("POST", "/v1/forget", tok, map[string]string{"subject": "alice@example.com"}); r.Status != 403 {
		t.Fatalf("forget with an encrypt token: %d, want 403", r.Status)
	}
	list, _, err := run("list", "--data-dir", dir)
	if err != nil || !strings.Contains(list, id) || !strings.Contains(list, "agent-7") || strings.Contains(list, tok) {
		t.Fatalf("token list: %v\n%s", err, list)
	}
	if _, msg, err := run("create", "--data-dir", dir, "--name", "x", "--scopes", "root"); err == nil {
		t.Fatalf("a token with an unknown scope was created: %s", msg)
	}
	if _, msg, err := run("revoke", "--data-dir", dir, id); err != nil {
		t.Fatalf("token revoke: %v %s", err, msg)
	}
	deadline := time.Now().Add(hang)
	for {
		r, err := s.callToken("POST", "/v1/encrypt", tok, enc)
		if err == nil && r.Status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still accepted after %v: %d", hang, r.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
