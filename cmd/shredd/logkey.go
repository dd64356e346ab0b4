package main

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/shredd/shredd/internal/datadir"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/translog"
)

// The transparency log's key files in the data directory. The log has its
// own Ed25519 key, apart from the attestation key: a checkpoint signs a
// tree, an attestation a claim, and either can be rotated or handed to a
// witness alone.
const (
	logKeyFile  = "log.key"  // signed-note private key (PRIVATE+KEY+<origin>+...), mode 0600
	logVKeyFile = "log.vkey" // signed-note verifier key: give it to regulators and monitors
)

// loadOrCreateLogKey returns the log's note signer and verifier key from
// dir, creating the pair on first start with a new random origin
// ("shredd/" and 16 hex digits, unique to this log). It refuses a
// verifier key file without its private key, a pair that does not match,
// and a private key file others can read.
func loadOrCreateLogKey(dir string) (note.Signer, string, bool, error) {
	keyPath, vkeyPath := filepath.Join(dir, logKeyFile), filepath.Join(dir, logVKeyFile)
	skey, err := datadir.Read(keyPath, datadir.Secret, maxKeyFile)
	created := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(vkeyPath); err == nil {
			return nil, "", false, fmt.Errorf("log key: %s exists without %s: restore the private key", vkeyPath, keyPath)
		}
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
		syncDir(dir)
		skey, created = []byte(s), true
	case err != nil:
		return nil, "", false, fmt.Errorf("log key: %w", err)
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return nil, "", false, fmt.Errorf("log key: %s: %w", keyPath, err)
	}
	vb, err := datadir.Read(vkeyPath, datadir.Public, maxKeyFile)
	if err != nil {
		return nil, "", false, fmt.Errorf("log key: %w", err)
	}
	vkey := strings.TrimSpace(string(vb))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, "", false, fmt.Errorf("log key: %s: %w", vkeyPath, err)
	}
	if v.Name() != signer.Name() || v.KeyHash() != signer.KeyHash() {
		return nil, "", false, fmt.Errorf("log key: %s is not the verifier key of %s", vkeyPath, keyPath)
	}
	return signer, vkey, created, nil
}

// openJournal loads (creating on first use) the data directory's
// attestation key and log key, opens the transparency log in db and
// returns the journal that the key tree and the service log through, with
// the attestation key. log, when set, is told about keys it created.
func openJournal(ctx context.Context, dir string, db *sql.DB, log *slog.Logger) (*journal.Journal, ed25519.PrivateKey, error) {
	attKey, created, err := loadOrCreateAttestationKey(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("attestation key: %w", err)
	}
	if created && log != nil {
		log.Info("created the attestation signing key; give its public half to whoever verifies attestations",
			"public_key", filepath.Join(dir, attestationPubFile))
	}
	signer, vkey, created, err := loadOrCreateLogKey(dir)
	if err != nil {
		return nil, nil, err
	}
	if created && log != nil {
		log.Info("created the transparency log key; give its verifier key to regulators and log monitors",
			"verifier_key", filepath.Join(dir, logVKeyFile), "origin", signer.Name())
	}
	tl, err := translog.Open(ctx, db, signer)
	if err != nil {
		return nil, nil, err
	}
	j, err := journal.New(tl, vkey, attKey, nil)
	if err != nil {
		return nil, nil, err
	}
	return j, attKey, nil
}
