package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/storage"
)

// secrets are the data directory's secrets the data depends on, as read at
// start-up: subject.key (every sid is its keyed hash, and the forget
// ledger's MAC key derives from it), the attestation key (held by its
// Signer alone, the one signer of attestations and log events) and the
// transparency log's key.
type secrets struct {
	subject []byte
	att     *attest.Signer
	log     note.Signer
	logVKey string
	created []string // the files this start created (a new data directory)
}

// missing lists the secret files of dir that do not exist.
func (s *secrets) missing() []string {
	var m []string
	if s.subject == nil {
		m = append(m, SecretFile)
	}
	if s.att == nil {
		m = append(m, AttestationKeyFile)
	}
	if s.log == nil {
		m = append(m, LogKeyFile)
	}
	return m
}

// readSecrets reads the secrets of dir, creating none: a missing file
// leaves its field nil; an unsafe or damaged one is an error.
func readSecrets(dir string) (*secrets, error) {
	s := &secrets{}
	b, err := datadir.Read(filepath.Join(dir, SecretFile), datadir.Secret, 64<<10)
	switch {
	case err == nil:
		s.subject = b
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("subject secret: %w", err)
	}
	key, err := readAttestationKey(filepath.Join(dir, AttestationKeyFile))
	switch {
	case err == nil:
		if s.att, err = attest.NewSigner(key); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(filepath.Join(dir, AttestationPubFile)); err == nil {
			return nil, fmt.Errorf("attestation key: %s exists without %s: restore the private key from where you keep it (docs/operations.md, \"What each file is for\")",
				filepath.Join(dir, AttestationPubFile), filepath.Join(dir, AttestationKeyFile))
		}
	default:
		return nil, err
	}
	signer, vkey, err := readLogKey(dir)
	switch {
	case err == nil:
		s.log, s.logVKey = signer, vkey
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return s, nil
}

// create makes the secrets of a new data directory that do not exist yet
// (a key pair made by shredd keygen before the first start is kept).
func (s *secrets) create(dir string) error {
	if s.subject == nil {
		s.subject = randomBytes(32)
		if err := datadir.Create(filepath.Join(dir, SecretFile), s.subject, datadir.Secret); err != nil {
			return fmt.Errorf("subject secret: %w", err)
		}
		s.created = append(s.created, SecretFile)
	}
	if s.att == nil {
		key, _, err := LoadOrCreateAttestationKey(dir)
		if err == nil {
			s.att, err = attest.NewSigner(key)
		}
		if err != nil {
			return fmt.Errorf("attestation key: %w", err)
		}
		s.created = append(s.created, AttestationKeyFile)
	} else if _, _, err := LoadOrCreateAttestationKey(dir); err != nil { // the public half, checked or written again
		return fmt.Errorf("attestation key: %w", err)
	}
	if s.log == nil {
		signer, vkey, _, err := loadOrCreateLogKey(dir)
		if err != nil {
			return err
		}
		s.log, s.logVKey = signer, vkey
		s.created = append(s.created, LogKeyFile)
	}
	return nil
}

// localState reports whether the data directory already holds state that
// needs its secrets: the SQLite database (when the store is SQLite) or a
// forget ledger with content. A database file that is a symlink, not a
// regular file, or readable by others is refused here, before anything is
// opened.
func localState(c Config) (bool, error) {
	state := false
	if c.Store == "" {
		for _, name := range []string{DBFile, DBFile + "-wal", DBFile + "-shm"} {
			err := datadir.Check(filepath.Join(c.DataDir, name), datadir.Secret)
			switch {
			case err == nil:
				state = state || name == DBFile
			case errors.Is(err, fs.ErrNotExist):
			default:
				return false, fmt.Errorf("database: %w", err)
			}
		}
	}
	fi, err := os.Lstat(c.LedgerPath())
	switch {
	case err == nil:
		state = state || fi.Size() > 0
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("forget ledger: %w", err)
	}
	return state, nil
}

// HasState reports whether the data directory of c, or its PostgreSQL
// database, already holds data (a SQLite database, a non-empty forget
// ledger, or pins, subjects or forgets in PostgreSQL): what a new root key
// or new secrets would not open. It changes nothing.
func HasState(ctx context.Context, c Config) (bool, error) {
	state, err := localState(c)
	if err != nil || state || c.Store == "" {
		return state, err
	}
	db, err := openStore(ctx, c.DataDir, c.Store, c.StoreTimeout)
	if err != nil {
		return false, err
	}
	defer db.Close()
	return dbState(ctx, db)
}

// dbState reports whether an open database holds state that needs the
// secrets: pinned fingerprints, subjects or forgets.
func dbState(ctx context.Context, db *storage.DB) (bool, error) {
	pins, err := db.SecretPins(ctx)
	if err != nil || len(pins) > 0 {
		return len(pins) > 0, err
	}
	subjects, err := keystore.HasSubjects(ctx, db)
	if err != nil || subjects {
		return subjects, wrapDB(err)
	}
	forgets, err := erasure.HasForgets(ctx, db)
	return forgets, wrapDB(err)
}

// wrapDB says that err, when not nil, is the database's.
func wrapDB(err error) error {
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// refuseMissing is the refused start of a data directory whose state needs
// secrets that are gone: nothing has been written, and a new secret would
// silently orphan the data (every subject id would hash to a new sid with
// no key, and forgets would be attested while the old ciphertexts open).
func refuseMissing(dir string, missing []string, where string) error {
	paths := make([]string, len(missing))
	for i, m := range missing {
		paths[i] = filepath.Join(dir, m)
	}
	return fmt.Errorf("%s missing, but %s holds data that needs %s: nothing was written, and no new secret is made next to existing data (it would open none of it, and forgets of old subjects would be attested while their data still opens). Restore %s from where you keep the data directory's secrets (docs/operations.md, \"What each file is for\")",
		strings.Join(paths, ", "), where, plural(len(missing), "it", "them"), plural(len(missing), "it", "them"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// fingerprints are the fingerprints (ledger.Fingerprint) of the secrets
// the data depends on: pinned in the database (pinSecrets) and in the
// forget ledger's header.
//
// The root's identity is its kind and its key's name, known only once the
// store has read its key: a Vault root store that did not answer at
// start-up leaves it empty, and it is then neither compared nor pinned.
func (s *secrets) fingerprints(root keystore.RootStore) ledger.Fingerprints {
	var rootFP string
	if d := root.Describe(); root.Kind() == "local" || d.Name != "" {
		rootFP = ledger.Fingerprint(ledger.FingerprintRoot, []byte(root.Kind()+"\x00"+d.Name))
	}
	return ledger.Fingerprints{
		SubjectKey:     ledger.Fingerprint(ledger.FingerprintSubjectKey, s.subject),
		Root:           rootFP,
		LogKey:         ledger.Fingerprint(ledger.FingerprintLogKey, []byte(s.logVKey)),
		AttestationKey: ledger.Fingerprint(ledger.FingerprintAttestationKey, s.att.Public()),
	}
}

// pins are the fingerprints as the database pins them, by file name.
func (s *secrets) pins(root keystore.RootStore) map[string]string {
	f := s.fingerprints(root)
	p := map[string]string{SecretFile: f.SubjectKey, AttestationKeyFile: f.AttestationKey, LogKeyFile: f.LogKey, "root": f.Root}
	if r, ok := root.(instanceRoot); ok {
		p[rootInstancePin] = r.Instance() // "" for a root file of an earlier release, until its claim
	}
	return p
}

// rootInstancePin is the pin of the local root file's instance identity.
const rootInstancePin = "root-instance"

// instanceRoot is a root store with an instance identity and a writer
// claim (keystore/local).
type instanceRoot interface {
	Instance() string
	Claim() error
}

// claimRoot makes this process the root's writer (local.Root.Claim) and
// adds its instance identity to the pins the database lacks: a root file
// of an earlier release gets its identity from the claim.
func claimRoot(root keystore.RootStore, pins, missing map[string]string) error {
	r, ok := root.(instanceRoot)
	if !ok {
		return nil
	}
	if err := r.Claim(); err != nil {
		return err
	}
	if pins[rootInstancePin] == "" && r.Instance() != "" {
		// A root file of an earlier release, given its identity by the
		// claim: checkPins refused a database that pins another, so this
		// one pins none yet.
		missing[rootInstancePin] = r.Instance()
	}
	return nil
}

// checkPins compares the secrets with the fingerprints the database pins,
// writing nothing, and returns the pins the database lacks. A secret that
// differs from its pin is a refused start that names the file and the fix.
func checkPins(ctx context.Context, db *storage.DB, dir string, want map[string]string, root keystore.RootStore) (map[string]string, error) {
	have, err := db.SecretPins(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{SecretFile, AttestationKeyFile, LogKeyFile, "root", rootInstancePin} {
		pinned, ok := have[name]
		if !ok || want[name] == "" || pinned == want[name] {
			continue
		}
		what, file := filepath.Join(dir, name), name
		switch name {
		case "root":
			what = "the root store (--root and its key name)"
		case rootInstancePin:
			what, file = "the root file "+filepath.Join(dir, RootFile)+" (its instance "+want[name]+")", RootFile
		}
		return nil, fmt.Errorf("%s is not the one this database was made with (fingerprint %s, the database pins %s): nothing was written. Put back the %s that goes with this database, or point the server at the database that goes with it (docs/operations.md, \"What each file is for\")",
			what, want[name], pinned, file)
	}
	if pinned, ok := have[rootInstancePin]; ok && want[rootInstancePin] == "" {
		if _, local := root.(instanceRoot); local {
			return nil, fmt.Errorf("the root file %s has no instance identity, but the database pins root instance %s: it is a root file of an earlier release or of another data directory, not this database's: nothing was written. Put back the root.key that goes with this database (docs/operations.md, \"What each file is for\")",
				filepath.Join(dir, RootFile), pinned)
		}
	}
	missing := map[string]string{}
	for _, name := range []string{SecretFile, AttestationKeyFile, LogKeyFile, "root", rootInstancePin} {
		if _, ok := have[name]; !ok && want[name] != "" {
			missing[name] = want[name]
		}
	}
	return missing, nil
}
