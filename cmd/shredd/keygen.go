package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"github.com/shredd/shredd/internal/datadir"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/shredd/shredd/attest"
)

// The attestation key files, in the directory given to keygen (and, for the
// server, its data directory).
const (
	attestationKeyFile = "attestation.key" // PKCS #8 PEM, mode 0600
	attestationPubFile = "attestation.pub" // PKIX PEM: hand it to whoever verifies
)

// maxKeyFile bounds what is read from a key file.
const maxKeyFile = 64 << 10

// keygenCmd runs `shredd keygen [--out DIR]`: a new Ed25519 attestation key
// pair in DIR, never overwriting one.
func keygenCmd(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd keygen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("out", ".", "directory to write "+attestationKeyFile+" and "+attestationPubFile+" to (created if missing)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, keygenUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "shredd keygen: unexpected argument %q\n%s\n", fl.Arg(0), keygenUsage)
		return exitUsage
	}
	_, pub, err := createAttestationKey(*out)
	if err != nil {
		fmt.Fprintln(stderr, "shredd keygen:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\nkey id %s\n", filepath.Join(*out, attestationPubFile), attest.KeyID(pub))
	fmt.Fprintf(stderr, "wrote %s (private, mode 0600: keep it secret) and %s (public: give it to verifiers)\n",
		filepath.Join(*out, attestationKeyFile), filepath.Join(*out, attestationPubFile))
	return exitOK
}

// loadOrCreateAttestationKey returns the attestation key of dir, creating
// the key pair (as keygen does) when neither file exists; created says
// which. A missing public key file is written again from the private key.
// It refuses a private key file that group or others can read, a public
// key file without its private key, and a pair that does not match.
func loadOrCreateAttestationKey(dir string) (key ed25519.PrivateKey, created bool, err error) {
	keyPath, pubPath := filepath.Join(dir, attestationKeyFile), filepath.Join(dir, attestationPubFile)
	key, err = readAttestationKey(keyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(pubPath); err == nil {
			return nil, false, fmt.Errorf("attestation key: %s exists without %s: restore the private key, or move the public key away to start a new pair", pubPath, keyPath)
		}
		key, _, err := createAttestationKey(dir)
		return key, err == nil, err
	case err != nil:
		return nil, false, err
	}
	pub := key.Public().(ed25519.PublicKey)
	b, err := datadir.Read(pubPath, datadir.Public, maxKeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return key, false, writePublicKey(pubPath, pub)
	}
	if err != nil {
		return nil, false, fmt.Errorf("attestation key: %w", err)
	}
	p, err := attest.ParsePublicKey(b)
	if err != nil {
		return nil, false, fmt.Errorf("attestation key: %s: %w", pubPath, err)
	}
	if !p.Equal(pub) {
		return nil, false, fmt.Errorf("attestation key: %s is not the public key of %s", pubPath, keyPath)
	}
	return key, false, nil
}

// createAttestationKey generates a key pair and writes both files to dir,
// refusing to overwrite either.
func createAttestationKey(dir string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	keyPath, pubPath := filepath.Join(dir, attestationKeyFile), filepath.Join(dir, attestationPubFile)
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, nil, fmt.Errorf("%s exists: refusing to overwrite an attestation key", p)
		}
	}
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("attestation key: %w", err)
	}
	keyPEM, err := attest.MarshalPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("attestation key: %w", err)
	}
	// The private key first: a crash in between leaves a key whose public
	// half loadOrCreateAttestationKey writes again, never a public key
	// without its private one.
	if err := writeExclusive(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePublicKey(pubPath, pub); err != nil {
		return nil, nil, err
	}
	syncDir(dir)
	return key, pub, nil
}

func writePublicKey(path string, pub ed25519.PublicKey) error {
	b, err := attest.MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	return writeExclusive(path, b, 0o644)
}

// writeExclusive creates path with mode perm (0600 or 0644) and writes b to
// it, failing if path exists (O_EXCL: two keygens cannot both win), and
// fsyncs the file and its directory; any failure is returned.
func writeExclusive(path string, b []byte, perm fs.FileMode) error {
	m := datadir.Secret
	if perm&0o044 != 0 {
		m = datadir.Public
	}
	err := datadir.Create(path, b, m)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: refusing to overwrite a key", path)
	}
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	return nil
}

// syncDir makes the new directory entries durable; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// readAttestationKey reads a private key file, refusing one that group or
// others may read (the key signs erasure claims).
func readAttestationKey(path string) (ed25519.PrivateKey, error) {
	b, err := datadir.Read(path, datadir.Secret, maxKeyFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("attestation key: %w", err)
	}
	key, err := attest.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("attestation key: %s: %w", path, err)
	}
	return key, nil
}

// readLimited reads a small file (a key), refusing one over maxKeyFile.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: over %d bytes, not a key file", path, maxKeyFile)
	}
	return b, nil
}

const keygenUsage = `usage: shredd keygen [--out DIR]
       writes a new Ed25519 attestation key pair: DIR/attestation.key (private, mode 0600)
       and DIR/attestation.pub (public, for shredd verify --key); never overwrites`
