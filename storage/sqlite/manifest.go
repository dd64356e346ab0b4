package sqlite

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ManifestSuffix names a backup's manifest: the backup's file name and
// this suffix, beside it.
const ManifestSuffix = ".manifest"

// ManifestFormat is the format of a Manifest (its "format" field).
const ManifestFormat = "shredd-backup-manifest/v1"

// LabelManifest is the domain of the key that authenticates manifests
// (ManifestKey).
const LabelManifest = "shredd/v1/backup-manifest"

// Errors of manifests.
var (
	// ErrManifest means a manifest is missing, unreadable, or of another
	// format.
	ErrManifest = errors.New("backup manifest unreadable")
	// ErrManifestMAC means a manifest's MAC does not verify under the data
	// directory's key: the manifest was edited, or written for another
	// data directory's subject.key.
	ErrManifestMAC = errors.New("backup manifest not authentic")
)

// A Manifest describes a backup and is written with it (FILE.manifest):
// the digest of every byte of the backup, the instance it was taken from,
// and where in the schema, root, transparency log and forget ledger it
// stands. Restore checks the backup against it before anything else.
type Manifest struct {
	Format        string    `json:"format"`
	File          string    `json:"file"`   // the backup's base name
	SHA256        string    `json:"sha256"` // hex digest of the whole file
	Size          int64     `json:"size"`
	Instance      string    `json:"instance"` // the transparency log's origin: one per data directory, made at its first start
	SchemaVersion int       `json:"schema_version"`
	TakenAt       time.Time `json:"taken_at"`
	RootStore     string    `json:"root_store"`
	RootVersion   int       `json:"root_version"`
	MinVersion    int       `json:"min_version"`
	LogSize       int64     `json:"log_size"`
	Forgets       int64     `json:"forgets"`      // committed forgets in the backup
	LastForget    string    `json:"last_forget"`  // id of the newest committed forget in the backup, "" for none
	LedgerLines   int64     `json:"ledger_lines"` // lines of the forget ledger when the backup was taken; -1 when unknown
	LedgerHead    string    `json:"ledger_head"`  // the forget ledger's chain head, when the ledger has one
	MAC           string    `json:"mac"`          // HMAC-SHA256 under ManifestKey of the manifest with mac ""
}

// ManifestKey derives the key that authenticates manifests from the data
// directory's subject secret (subject.key), under LabelManifest.
//
// Why this key: whoever can edit a backup (its storage, its transport) must
// not be able to make a manifest for an edited file, so the key never
// leaves the data directory. subject.key is the one secret without which
// a backup is of no use anyway (every subject id is hashed with it), so
// anyone able to restore the backup holds it; it is never sent anywhere.
// The attestation key would do too, but it signs public erasure claims:
// one key, one purpose.
func ManifestKey(subjectSecret []byte) []byte {
	m := hmac.New(sha256.New, subjectSecret)
	m.Write([]byte(LabelManifest))
	return m.Sum(nil)
}

func (m Manifest) mac(key []byte) []byte {
	m.MAC = ""
	b, _ := json.Marshal(m)
	h := hmac.New(sha256.New, key)
	h.Write(b)
	return h.Sum(nil)
}

// Marshal sets m's MAC under key and returns its JSON form.
func (m Manifest) Marshal(key []byte) []byte {
	m.Format = ManifestFormat
	m.MAC = hex.EncodeToString(m.mac(key))
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// ParseManifest parses a manifest and checks its MAC under key: an error
// wrapping ErrManifest for a manifest it cannot read, ErrManifestMAC for one
// that does not verify.
func ParseManifest(b []byte, key []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if m.Format != ManifestFormat {
		return m, fmt.Errorf("%w: format %q, want %q", ErrManifest, m.Format, ManifestFormat)
	}
	got, err := hex.DecodeString(m.MAC)
	if err != nil || !hmac.Equal(got, m.mac(key)) {
		return m, ErrManifestMAC
	}
	return m, nil
}
