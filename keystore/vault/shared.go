package vault

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
)

var (
	_ keystore.SecretKeeper = (*Root)(nil)
	_ keystore.RecordKeeper = (*Root)(nil)
)

// secretsKey is the Transit key that wraps the shared secrets' bundle: a
// key of its own, never rotated or trimmed by epochs (the bundle holds no
// subject's key), created like the root key (not exportable, no plaintext
// backup).
func (s *Root) secretsKey() string { return s.key + "-secrets" }

// kvData is the KV v2 data path of shredd/<key>/<rel>.
func (s *Root) kvData(rel string) string { return s.kv + "/data/shredd/" + s.key + "/" + rel }

// kvMeta is the KV v2 metadata path of shredd/<key>/<rel>.
func (s *Root) kvMeta(rel string) string { return s.kv + "/metadata/shredd/" + s.key + "/" + rel }

// Secrets reads the shared secrets' bundle from the KV v2 secret
// shredd/<key>/secrets of HeadMount and unwraps it with Transit.
func (s *Root) Secrets(ctx context.Context) ([]byte, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	d, err := s.kvRead(ctx, s.kvData("secrets"))
	if err != nil {
		return nil, fmt.Errorf("vault: shared secrets: %w", err)
	}
	ct, _ := d["wrapped"].(string)
	if ct == "" {
		return nil, fmt.Errorf("vault: shared secrets: %w: no wrapped bundle", keystore.ErrCorrupt)
	}
	sec, err := s.write(ctx, "decrypt/"+s.secretsKey(), map[string]any{"ciphertext": ct})
	if err != nil {
		return nil, fmt.Errorf("vault: shared secrets: %w", err)
	}
	var pt string
	if sec != nil && sec.Data != nil {
		pt, _ = sec.Data["plaintext"].(string)
	}
	b, err := base64.StdEncoding.DecodeString(pt)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("vault: shared secrets: %w: unreadable", keystore.ErrCorrupt)
	}
	return b, nil
}

// KeepSecrets wraps b with Transit and writes it as the first version of
// shredd/<key>/secrets (check-and-set 0): when another node kept a bundle
// first, that bundle is read and returned instead.
func (s *Root) KeepSecrets(ctx context.Context, b []byte) ([]byte, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	if _, err := s.write(ctx, "keys/"+s.secretsKey(), map[string]any{"type": "aes256-gcm96", "exportable": false, "allow_plaintext_backup": false}); err != nil {
		return nil, fmt.Errorf("vault: shared secrets: create key: %w", err)
	}
	sec, err := s.write(ctx, "encrypt/"+s.secretsKey(), map[string]any{"plaintext": base64.StdEncoding.EncodeToString(b)})
	if err != nil {
		return nil, fmt.Errorf("vault: shared secrets: %w", err)
	}
	var ct string
	if sec != nil && sec.Data != nil {
		ct, _ = sec.Data["ciphertext"].(string)
	}
	if ct == "" {
		return nil, fmt.Errorf("vault: shared secrets: %w: encrypt gave no ciphertext", keystore.ErrCorrupt)
	}
	err = s.call(ctx, false, func(ctx context.Context, n node) error {
		_, err := n.c.Logical().WriteWithContext(ctx, s.kvData("secrets"),
			map[string]any{"data": map[string]any{"wrapped": ct}, "options": map[string]any{"cas": 0}})
		return err
	})
	if err != nil && !casMismatch(err) {
		return nil, fmt.Errorf("vault: keep shared secrets: %w", classify(err))
	}
	// Kept now, by this node or (a mismatch) another: read back what is
	// kept, never assume.
	return s.Secrets(ctx)
}

// casMismatch reports whether a KV v2 write was refused because the
// secret already exists (check-and-set 0).
func casMismatch(err error) bool {
	var re *vaultapi.ResponseError
	return errors.As(err, &re) && re.StatusCode == 400 && strings.Contains(strings.ToLower(strings.Join(re.Errors, " ")), "check-and-set")
}

// kvRead reads the data of a KV v2 secret; a secret that does not exist
// (or whose latest version is deleted) gives keystore.ErrNotFound.
func (s *Root) kvRead(ctx context.Context, p string) (map[string]any, error) {
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().ReadWithContext(ctx, p)
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	var d map[string]any
	if sec != nil && sec.Data != nil {
		d, _ = sec.Data["data"].(map[string]any)
	}
	if d == nil {
		return nil, keystore.ErrNotFound
	}
	return d, nil
}

// kvWrite writes data as a new version of the KV v2 secret at data path
// p; the error is classify's.
func (s *Root) kvWrite(ctx context.Context, p string, data map[string]any) error {
	err := s.call(ctx, false, func(ctx context.Context, n node) error {
		_, err := n.c.Logical().WriteWithContext(ctx, p, map[string]any{"data": data})
		return err
	})
	return classify(err)
}

// recordName checks a forget record's name: it becomes part of a Vault
// path.
func recordName(name string) error {
	if name == "" || len(name) > 128 || strings.Trim(name, "0123456789abcdef-") != "" {
		return fmt.Errorf("vault: forget record name %q: %w", name, shredd.ErrInvalid)
	}
	return nil
}

// KeepRecord writes record b as the KV v2 secret
// shredd/<key>/forgets/<name> of HeadMount.
func (s *Root) KeepRecord(ctx context.Context, name string, b []byte) error {
	if err := recordName(name); err != nil {
		return err
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if err := s.kvWrite(ctx, s.kvData("forgets/"+name), map[string]any{"record": base64.StdEncoding.EncodeToString(b)}); err != nil {
		return fmt.Errorf("vault: keep forget record: %w", err)
	}
	return nil
}

// CheckKV checks that the KV v2 mount (Config.HeadMount) where shredd
// keeps the forget records, the shared secrets, the key's owner and the
// marks is there, is KV version 2, and that shredd's token may use the
// paths shredd uses in it: a Vault root without it would keep nothing
// outside the database, so a start refuses rather than warn.
func (s *Root) CheckKV(ctx context.Context) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	return s.checkKV(ctx)
}

// kvNeeds are the capabilities shredd needs on its KV paths, by path
// relative to shredd/<key>/ (a name in a folder stands for the folder).
var kvNeeds = []struct {
	rel  string
	meta bool // the metadata path, not the data path
	caps []string
}{
	{"forgets/probe", false, []string{"read", "create", "update"}},
	{"forgets/", true, []string{"list"}},
	{"marks/probe", false, []string{"read", "create", "update"}},
	{"owner", false, []string{"read", "create", "update"}},
}

// checkKV is CheckKV without the login and key check (Check calls it
// before it creates a key).
func (s *Root) checkKV(ctx context.Context) error {
	// A list or a read of a missing mount answers "nothing there", as of
	// a path with no secret: ask Vault which mount serves the path (what
	// the vault CLI's kv commands ask), which needs a capability on it.
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+s.kvData("forgets/probe"))
		return err
	})
	if err == nil {
		var typ, version string
		if sec != nil && sec.Data != nil {
			typ, _ = sec.Data["type"].(string)
			opts, _ := sec.Data["options"].(map[string]any)
			version, _ = opts["version"].(string)
		}
		if typ != "kv" || version != "2" {
			err = fmt.Errorf("%s/ is not a KV version 2 mount (type %q, version %q)", s.kv, typ, version)
		}
	} else {
		err = classify(err)
	}
	if err == nil {
		err = s.checkKVCapabilities(ctx)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, keystore.ErrRootUnavailable) && !errors.Is(err, errNoMount) && !errors.Is(err, errForbidden) {
		return err // Vault does not answer: not the mount's fault
	}
	return fmt.Errorf("vault: the KV version 2 mount %s/ at %s, where shredd keeps its forget records, the key's owner and the registration WAL's mark, is not usable: %w: %w; "+
		"nothing was changed. Enable it (vault secrets enable -path=%s kv-v2), or name the KV v2 mount you use with --vault-kv-mount, and grant shredd's token the policy of docs/operations.md (shredd keeps no forget outside the database without it)",
		s.kv, s.addresses(), ErrKVUnusable, err, s.kv)
}

// ErrKVUnusable means the KV v2 mount shredd keeps its records in is
// missing, of another kind, or not allowed to shredd's token: a refused
// start, not a backend that is down.
var ErrKVUnusable = errors.New("vault KV mount not usable")

// checkKVCapabilities asks Vault (sys/capabilities-self, in every token's
// default policy) whether the token may do what shredd does on its KV
// paths, and names the first it may not.
func (s *Root) checkKVCapabilities(ctx context.Context) error {
	var paths []string
	for _, n := range kvNeeds {
		if n.meta {
			paths = append(paths, s.kvMeta(n.rel))
		} else {
			paths = append(paths, s.kvData(n.rel))
		}
	}
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().WriteWithContext(ctx, "sys/capabilities-self", map[string]any{"paths": paths})
		return err
	})
	if err != nil {
		return fmt.Errorf("asking the token's capabilities: %w", classify(err))
	}
	for i, p := range paths {
		var have []string
		if sec != nil && sec.Data != nil {
			if l, ok := sec.Data[p].([]any); ok {
				for _, c := range l {
					if c, ok := c.(string); ok {
						have = append(have, c)
					}
				}
			}
		}
		if slices.Contains(have, "root") {
			continue
		}
		for _, c := range kvNeeds[i].caps {
			if !slices.Contains(have, c) {
				return fmt.Errorf("the token may not %s %s (it has %v)", c, p, have)
			}
		}
	}
	return nil
}

// Records lists the names under shredd/<key>/forgets/.
func (s *Root) Records(ctx context.Context) ([]string, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	var sec *vaultapi.Secret
	err := s.call(ctx, false, func(ctx context.Context, n node) (err error) {
		sec, err = n.c.Logical().ListWithContext(ctx, s.kvMeta("forgets/"))
		return err
	})
	if err != nil {
		if errors.Is(classify(err), keystore.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("vault: list forget records: %w", classify(err))
	}
	var out []string
	if sec != nil && sec.Data != nil {
		keys, _ := sec.Data["keys"].([]any)
		for _, k := range keys {
			if name, ok := k.(string); ok && recordName(name) == nil {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// ReadRecord reads the record shredd/<key>/forgets/<name>.
func (s *Root) ReadRecord(ctx context.Context, name string) ([]byte, error) {
	if err := recordName(name); err != nil {
		return nil, err
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	d, err := s.kvRead(ctx, s.kvData("forgets/"+name))
	if err != nil {
		return nil, fmt.Errorf("vault: forget record: %w", err)
	}
	r, _ := d["record"].(string)
	b, err := base64.StdEncoding.DecodeString(r)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("vault: forget record %s: %w: unreadable", name, keystore.ErrCorrupt)
	}
	return b, nil
}

// DropRecord deletes the record shredd/<key>/forgets/<name> with its
// versions and metadata.
func (s *Root) DropRecord(ctx context.Context, name string) error {
	if err := recordName(name); err != nil {
		return err
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	err := s.call(ctx, false, func(ctx context.Context, n node) error {
		_, err := n.c.Logical().DeleteWithContext(ctx, s.kvMeta("forgets/"+name))
		return err
	})
	if err != nil {
		return fmt.Errorf("vault: drop forget record: %w", classify(err))
	}
	return nil
}

var _ keystore.MarkKeeper = (*Root)(nil)

// markName checks a mark's stream name: it becomes part of a Vault path.
func markName(stream string) error {
	if stream == "" || len(stream) > 128 || strings.Trim(stream, "0123456789abcdefghijklmnopqrstuvwxyz-") != "" {
		return fmt.Errorf("vault: mark %q: %w", stream, shredd.ErrInvalid)
	}
	return nil
}

// Mark reads stream's high-water mark from the KV v2 secret
// shredd/<key>/marks/<stream> of HeadMount.
func (s *Root) Mark(ctx context.Context, stream string) ([]byte, error) {
	if err := markName(stream); err != nil {
		return nil, err
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	d, err := s.kvRead(ctx, s.kvData("marks/"+stream))
	if err != nil {
		return nil, fmt.Errorf("vault: mark %s: %w", stream, err)
	}
	m, _ := d["mark"].(string)
	if m == "" || !json.Valid([]byte(m)) {
		return nil, fmt.Errorf("vault: mark %s: %w: unreadable", stream, keystore.ErrCorrupt)
	}
	return []byte(m), nil
}

// KeepMark writes stream's mark as a new version of the KV v2 secret
// shredd/<key>/marks/<stream> of HeadMount.
func (s *Root) KeepMark(ctx context.Context, stream string, mark []byte) error {
	if err := markName(stream); err != nil {
		return err
	}
	if !json.Valid(mark) {
		return fmt.Errorf("vault: mark %s: not JSON: %w", stream, shredd.ErrInvalid)
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if err := s.kvWrite(ctx, s.kvData("marks/"+stream), map[string]any{"mark": string(mark)}); err != nil {
		return fmt.Errorf("vault: keep mark %s: %w", stream, err)
	}
	return nil
}

// Owner reads the instance that owns the Transit key (KeepOwner): the
// transparency log's origin of the data directories (or the nodes of one
// installation) that use it, "" when none was kept yet.
func (s *Root) Owner(ctx context.Context) (string, error) {
	if err := s.ensure(ctx); err != nil {
		return "", err
	}
	d, err := s.kvRead(ctx, s.kvData("owner"))
	if errors.Is(err, keystore.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("vault: the key's owner: %w", err)
	}
	o, _ := d["instance"].(string)
	if o == "" {
		return "", fmt.Errorf("vault: the key's owner: %w: unreadable", keystore.ErrCorrupt)
	}
	return o, nil
}

// KeepOwner records instance as the owner of the Transit key, at
// shredd/<key>/owner of HeadMount: two installations on one key would
// each destroy, in their epochs, the versions the other's data needs.
func (s *Root) KeepOwner(ctx context.Context, instance string) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if err := s.kvWrite(ctx, s.kvData("owner"), map[string]any{"instance": instance}); err != nil {
		return fmt.Errorf("vault: keep the key's owner: %w", err)
	}
	return nil
}
