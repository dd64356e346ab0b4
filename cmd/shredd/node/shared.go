package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
)

// sharedFiles are the secret files (and their public halves) a root store
// that keeps secrets (keystore.SecretKeeper, the Vault root store) holds
// for every node: a node's data directory then holds a cache of them it
// can lose. The admin token is not among them: it is the operator's
// credential (its hash is in the database), and a node needs none.
var sharedFiles = []struct {
	name string
	mode datadir.Mode
}{
	{SecretFile, datadir.Secret},
	{AttestationKeyFile, datadir.Secret},
	{AttestationPubFile, datadir.Public},
	{LogKeyFile, datadir.Secret},
	{LogVKeyFile, datadir.Public},
}

// secretsBundle is the bundle kept with the root store: each shared
// file's bytes.
type secretsBundle struct {
	Format string            `json:"format"`
	Files  map[string][]byte `json:"files"`
}

const bundleFormat = "shredd-secrets/v1"

func decodeBundle(b []byte) (secretsBundle, error) {
	var sb secretsBundle
	if err := json.Unmarshal(b, &sb); err != nil || sb.Format != bundleFormat {
		return sb, fmt.Errorf("shared secrets kept with the root store: %w: not a bundle of this release", keystore.ErrCorrupt)
	}
	for _, f := range sharedFiles {
		if len(sb.Files[f.name]) == 0 {
			return sb, fmt.Errorf("shared secrets kept with the root store: %w: %s missing", keystore.ErrCorrupt, f.name)
		}
	}
	return sb, nil
}

// fetchShared writes into dir the shared files it lacks from the bundle the
// root store keeps, and checks those it has against it: a data directory
// whose secrets differ from the cluster's is refused (its database, ledger
// or log would be another instance's). It reports whether a bundle was
// kept; a root store that cannot be read is not an error (the node starts
// from its cached files, failing closed until the root store answers).
func fetchShared(ctx context.Context, dir string, keeper keystore.SecretKeeper, log *slog.Logger) (bool, error) {
	b, err := keeper.Secrets(ctx)
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		return false, nil
	case errors.Is(err, keystore.ErrRootUnavailable):
		log.Warn("the shared secrets could not be read from the root store; starting from the data directory's copies", "error", err.Error())
		return false, nil
	case err != nil:
		return false, err
	}
	sb, err := decodeBundle(b)
	if err != nil {
		return false, err
	}
	for _, f := range sharedFiles {
		path := filepath.Join(dir, f.name)
		have, err := datadir.Read(path, f.mode, 64<<10)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := datadir.Create(path, sb.Files[f.name], f.mode); err != nil {
				return true, fmt.Errorf("shared secrets: %w", err)
			}
		case err != nil:
			return true, fmt.Errorf("shared secrets: %w", err)
		case !bytes.Equal(have, sb.Files[f.name]):
			return true, fmt.Errorf("%s differs from the shared secrets the root store keeps for every node: this data directory belongs to another shredd instance; start the node with an empty data directory (its secrets come from the root store), or put back this instance's root store (docs/scale-out.md, \"Nothing a node must keep\")", path)
		}
	}
	return true, nil
}

// keepShared keeps the data directory's shared files with the root store
// when it keeps none yet (the first node of a cluster, or one started
// before the root store kept secrets). When another node kept its own
// first, the files this start created (created) are replaced by those;
// files that existed before are refused instead (two instances' secrets
// on one root store).
func keepShared(ctx context.Context, dir string, keeper keystore.SecretKeeper, created []string, log *slog.Logger) error {
	sb := secretsBundle{Format: bundleFormat, Files: map[string][]byte{}}
	for _, f := range sharedFiles {
		b, err := datadir.Read(filepath.Join(dir, f.name), f.mode, 64<<10)
		if err != nil {
			return fmt.Errorf("shared secrets: %w", err)
		}
		sb.Files[f.name] = b
	}
	mine, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	kept, err := keeper.KeepSecrets(ctx, mine)
	if errors.Is(err, keystore.ErrRootUnavailable) {
		log.Warn("the shared secrets could not be kept with the root store; the next start tries again", "error", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	if bytes.Equal(kept, mine) {
		log.Info("kept the shared secrets with the root store: every other node takes them from there, with nothing copied")
		return nil
	}
	if len(created) < len(sharedFiles)-2 { // files that existed before this start
		_, err := fetchShared(ctx, dir, keeper, log) // refuses, naming the first file that differs
		if err == nil {
			err = errors.New("shared secrets: the root store keeps other secrets than this data directory's")
		}
		return err
	}
	for _, f := range sharedFiles {
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("shared secrets: %w", err)
		}
	}
	_, err = fetchShared(ctx, dir, keeper, log)
	return err
}
