package node

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/translog"
)

// The attestation key files, in the directory given to shredd keygen (and,
// for the server, its data directory).
const (
	AttestationKeyFile = "attestation.key" // PKCS #8 PEM, mode 0600
	AttestationPubFile = "attestation.pub" // PKIX PEM: hand it to whoever verifies
)

// maxKeyFile bounds what is read from a key file.
const maxKeyFile = 64 << 10

// LoadOrCreateAttestationKey returns the attestation key of dir, creating
// the key pair (as keygen does) when neither file exists; created says
// which. A missing public key file is written again from the private key.
// It refuses a private key file that group or others can read, a public
// key file without its private key, and a pair that does not match.
func LoadOrCreateAttestationKey(dir string) (key ed25519.PrivateKey, created bool, err error) {
	keyPath, pubPath := filepath.Join(dir, AttestationKeyFile), filepath.Join(dir, AttestationPubFile)
	key, err = readAttestationKey(keyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(pubPath); err == nil {
			return nil, false, fmt.Errorf("attestation key: %s exists without %s: restore the private key, or move the public key away to start a new pair", pubPath, keyPath)
		}
		key, _, err := CreateAttestationKey(dir)
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
		return nil, false, fmt.Errorf("attestation key: %s is not the public key of %s: one of the two was replaced; nothing was written. Put back this data directory's attestation.key (its public half is what verifiers hold), or, if the private key is the right one, remove %s: the start writes it again from the private key", pubPath, keyPath, pubPath)
	}
	return key, false, nil
}

// CreateAttestationKey generates a key pair and writes both files to dir,
// refusing to overwrite either.
func CreateAttestationKey(dir string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	keyPath, pubPath := filepath.Join(dir, AttestationKeyFile), filepath.Join(dir, AttestationPubFile)
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
	// half LoadOrCreateAttestationKey writes again, never a public key
	// without its private one.
	if err := writeExclusive(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePublicKey(pubPath, pub); err != nil {
		return nil, nil, err
	}
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

// The transparency log's key files in the data directory. The log has its
// own Ed25519 key, apart from the attestation key: a checkpoint signs a
// tree, an attestation a claim, and either can be rotated or handed to a
// witness alone.
const (
	LogKeyFile  = "log.key"  // signed-note private key (PRIVATE+KEY+<origin>+...), mode 0600
	LogVKeyFile = "log.vkey" // signed-note verifier key: give it to regulators and monitors
)

// loadOrCreateLogKey returns the log's note signer and verifier key from
// dir, creating the pair on first start with a new random origin
// ("shredd/" and 16 hex digits, unique to this log). It refuses a
// verifier key file without its private key, a pair that does not match,
// and a private key file others can read.
func loadOrCreateLogKey(dir string) (note.Signer, string, bool, error) {
	signer, vkey, err := readLogKey(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return signer, vkey, false, err
	}
	keyPath, vkeyPath := filepath.Join(dir, LogKeyFile), filepath.Join(dir, LogVKeyFile)
	s, v, err := translog.GenerateKey("shredd/" + hex.EncodeToString(randomBytes(8)))
	if err != nil {
		return nil, "", false, err
	}
	if err := writeExclusive(keyPath, []byte(s+"\n"), 0o600); err != nil {
		return nil, "", false, err
	}
	if err := writeExclusive(vkeyPath, []byte(v+"\n"), 0o644); err != nil {
		return nil, "", false, err
	}
	signer, vkey, err = readLogKey(dir)
	return signer, vkey, err == nil, err
}

// readLogKey reads the log's key pair from dir, creating nothing: a
// missing private key (with no verifier key either) is fs.ErrNotExist.
func readLogKey(dir string) (note.Signer, string, error) {
	keyPath, vkeyPath := filepath.Join(dir, LogKeyFile), filepath.Join(dir, LogVKeyFile)
	skey, err := datadir.Read(keyPath, datadir.Secret, maxKeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(vkeyPath); err == nil {
			return nil, "", fmt.Errorf("log key: %s exists without %s: restore the private key from where you keep it (docs/operations.md, \"What each file is for\")", vkeyPath, keyPath)
		}
		return nil, "", err
	case err != nil:
		return nil, "", fmt.Errorf("log key: %w", err)
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return nil, "", fmt.Errorf("log key: %s: %w", keyPath, err)
	}
	vb, err := datadir.Read(vkeyPath, datadir.Public, maxKeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		// Not fs.ErrNotExist itself: the private key is there, and the
		// start must not take log.key for missing.
		return nil, "", fmt.Errorf("log key: %s is missing while %s is there: nothing was written; put back log.vkey, the log's verifier key, from where you keep it (regulators and log monitors hold copies; docs/operations.md, \"What each file is for\")", vkeyPath, keyPath)
	}
	if err != nil {
		return nil, "", fmt.Errorf("log key: %w", err)
	}
	vkey := strings.TrimSpace(string(vb))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, "", fmt.Errorf("log key: %s: %w", vkeyPath, err)
	}
	if v.Name() != signer.Name() || v.KeyHash() != signer.KeyHash() {
		return nil, "", fmt.Errorf("log key: %s is not the verifier key of %s", vkeyPath, keyPath)
	}
	return signer, vkey, nil
}

// openJournal opens the transparency log in db with the data directory's
// log key and returns the journal that the key tree and the service log
// through, its events signed by the attestation key's Signer.
func openJournal(ctx context.Context, sec *secrets, db *storage.DB) (*journal.Journal, error) {
	tl, err := translog.Open(ctx, db, sec.log)
	if err != nil {
		return nil, err
	}
	return journal.New(tl, sec.logVKey, sec.att, nil)
}

// bootstrapAdminToken gives a new installation its first token: an admin
// token written to path (mode 0600), announced once in the log by its path.
// The file is written and fsynced before the token is stored: a crash in
// between leaves a file whose hash the next start imports, never a token
// nobody holds. A data directory from before the token store keeps its
// admin token file the same way.
func bootstrapAdminToken(ctx context.Context, tokens *access.Tokens, path string, log *slog.Logger) error {
	n, err := tokens.Count(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		// The file, when there, should be a token of this database: one
		// of another instance (a copied file) or a revoked one gets 401
		// for every call, so say so now rather than leave it to the caller.
		b, err := datadir.Read(path, datadir.Secret, 64<<10)
		if err != nil {
			return nil // none (or refused before, with its own fix)
		}
		if _, err := tokens.Authenticate(ctx, strings.TrimSpace(string(b))); errors.Is(err, access.ErrTokenInvalid) {
			log.Warn("the admin token file is not a live token of this database (another instance's, or revoked): calls with it answer 401; remove it and create a token with shredd token create, or put back this data directory's admin.token",
				"path", path)
		}
		return nil
	}
	b, created, err := readOrCreate(path, func() []byte {
		return []byte(access.TokenPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32)) + "\n")
	})
	if err != nil {
		return err
	}
	crashpoint.Hit("admintoken:written")
	if err := tokens.Import(ctx, "admin", []string{access.ScopeAdmin}, sha256.Sum256([]byte(strings.TrimSpace(string(b))))); err != nil {
		return err
	}
	if created {
		log.Info("created the admin token; send it as 'Authorization: Bearer <token>'", "path", path)
	}
	return nil
}

// readOrCreate returns the secret in path, creating it (mode 0600) with
// make when the file does not exist; created says which. The file is never
// followed through a symlink and must be readable by its owner only; a new
// file is fsynced with its directory before use, and a failed write stops
// the start.
func readOrCreate(path string, make func() []byte) (b []byte, created bool, err error) {
	b, err = datadir.Read(path, datadir.Secret, 64<<10)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, false, err
	}
	b = make()
	if err := datadir.Create(path, b, datadir.Secret); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
