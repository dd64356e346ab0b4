package vault

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
)

var _ keystore.SubjectKMS = (*SubjectKeys)(nil)

// SubjectKeyPrefix starts the name of every per-subject Transit key.
const SubjectKeyPrefix = "shredd-s-"

// LabelSubjectKeyName is the domain-separation label of per-subject Transit
// key names.
const LabelSubjectKeyName = "shredd/v1/transit-subject-key"

// SubjectKeys keeps one Transit key per subject (--subject-keys transit):
// each subject's DEK is a Transit data key wrapped by the subject's own
// Transit key, and forgetting the subject deletes that Transit key, so the
// destruction happens in Vault at once, with no epoch. It shares the Root's
// client and credentials.
type SubjectKeys struct{ s *Root }

// SubjectKeys returns the per-subject key store on the same Vault and mount.
func (s *Root) SubjectKeys() *SubjectKeys { return &SubjectKeys{s: s} }

// Name returns the Transit key name of a subject: the prefix and 32 hex
// digits of SHA-256 over a label and the sid. The sid is already a keyed hash
// of the subject id, so the name says nothing about the subject to anyone
// without shredd's subject secret, and it is not the sid itself, so Vault's
// key list cannot be joined with shredd's database by value.
func (k *SubjectKeys) Name(sid envelope.SID) string {
	h := sha256.New()
	h.Write([]byte(LabelSubjectKeyName))
	h.Write([]byte{0})
	h.Write(sid[:])
	return SubjectKeyPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// DataKey creates the subject's Transit key when it does not exist and
// returns a new 256-bit data key from Transit datakey: the plaintext and its
// ciphertext under the subject's key.
func (k *SubjectKeys) DataKey(ctx context.Context, sid envelope.SID) ([]byte, []byte, error) {
	if err := k.s.ensure(ctx); err != nil {
		return nil, nil, err
	}
	name := k.Name(sid)
	// Creating an existing key is a no-op in Transit.
	if _, err := k.s.write(ctx, "keys/"+name, map[string]any{"type": "aes256-gcm96", "exportable": false, "allow_plaintext_backup": false}); err != nil {
		return nil, nil, fmt.Errorf("vault: subject key: %w", err)
	}
	sec, err := k.s.write(ctx, "datakey/plaintext/"+name, map[string]any{"bits": 256})
	if err != nil {
		return nil, nil, fmt.Errorf("vault: datakey: %w", err)
	}
	if sec == nil || sec.Data == nil {
		return nil, nil, fmt.Errorf("vault: datakey: empty answer: %w", keystore.ErrRootUnavailable)
	}
	pt64, _ := sec.Data["plaintext"].(string)
	ct, _ := sec.Data["ciphertext"].(string)
	pt, err := base64.StdEncoding.DecodeString(pt64)
	if err != nil || len(pt) != envelope.KeySize || !strings.HasPrefix(ct, "vault:v") {
		return nil, nil, fmt.Errorf("vault: datakey: malformed answer: %w", keystore.ErrRootUnavailable)
	}
	return pt, []byte(ct), nil
}

// Decrypt unwraps a subject's data key. A deleted subject key gives
// ErrShredded.
func (k *SubjectKeys) Decrypt(ctx context.Context, sid envelope.SID, wrapped []byte) ([]byte, error) {
	if err := k.s.ensure(ctx); err != nil {
		return nil, err
	}
	sec, err := k.s.write(ctx, "decrypt/"+k.Name(sid), map[string]any{"ciphertext": string(wrapped)})
	if errors.Is(err, keystore.ErrNotFound) {
		return nil, fmt.Errorf("vault: subject key deleted: %w", keystore.ErrShredded)
	}
	if err != nil {
		return nil, fmt.Errorf("vault: decrypt: %w", err)
	}
	pt64, _ := sec.Data["plaintext"].(string)
	pt, err := base64.StdEncoding.DecodeString(pt64)
	if err != nil || len(pt) != envelope.KeySize {
		return nil, fmt.Errorf("vault: decrypt: %w: bad plaintext", keystore.ErrCorrupt)
	}
	return pt, nil
}

// Destroy deletes the subject's Transit key (setting deletion_allowed first).
// A key that does not exist is already destroyed.
func (k *SubjectKeys) Destroy(ctx context.Context, sid envelope.SID) error {
	if err := k.s.ensure(ctx); err != nil {
		return err
	}
	name := k.Name(sid)
	_, err := k.s.write(ctx, "keys/"+name+"/config", map[string]any{"deletion_allowed": true})
	if errors.Is(err, keystore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vault: destroy subject key: %w", err)
	}
	if err := k.s.call(ctx, false, func(ctx context.Context, n node) error {
		_, err := n.c.Logical().DeleteWithContext(ctx, k.s.path("keys/"+name))
		return err
	}); err != nil {
		if err := classify(err); !errors.Is(err, keystore.ErrNotFound) {
			return fmt.Errorf("vault: destroy subject key: %w", err)
		}
	}
	return nil
}

// Exists reports whether the subject's Transit key exists.
func (k *SubjectKeys) Exists(ctx context.Context, sid envelope.SID) (bool, error) {
	if err := k.s.ensure(ctx); err != nil {
		return false, err
	}
	var sec *vaultapi.Secret
	err := k.s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().ReadWithContext(ctx, k.s.path("keys/"+k.Name(sid)))
		return err
	})
	if err != nil {
		return false, classify(err)
	}
	return sec != nil && sec.Data != nil, nil
}

// SubjectPolicy returns the Vault policy (HCL) for per-subject keys: the
// keys under the name prefix, their data keys and decryption, and nothing
// else. Combine it with Policy for the root key.
func SubjectPolicy(mount string) string {
	p := strings.Trim(mount, "/") + "/"
	return fmt.Sprintf(`# shredd per-subject keys (--subject-keys transit).
path "%[1]skeys/%[2]s*" {
  capabilities = ["read", "create", "update", "delete"]
}
path "%[1]skeys/%[2]s*/config" {
  capabilities = ["update"]
}
path "%[1]sdatakey/plaintext/%[2]s*" {
  capabilities = ["update"]
}
path "%[1]sdecrypt/%[2]s*" {
  capabilities = ["update"]
}
`, p, SubjectKeyPrefix)
}
