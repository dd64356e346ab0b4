// Package local is the embedded root store of shredd: the root key versions
// live in one file (mode 0600) in the data directory. It implements
// keystore.RootStore; Vault Transit is the production alternative.
//
// Destroying a version rewrites the file without it and overwrites the old
// file's bytes before unlinking it. On journaling or copy-on-write file
// systems and on flash, old blocks may survive below the file system; the
// operations guide states this residual, and the Vault root store avoids it.
package local

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/shredd/shredd/keystore"
)

// LabelWrap is the domain-separation label bound into every wrap as
// associated data, together with the version.
const LabelWrap = "shredd/v1/root-wrap"

const (
	fileFormat = "shredd-root/v1"
	keySize    = 32
	nonceSize  = 12
	// A blob is version (4 bytes, big-endian) ‖ nonce (12) ‖ AES-256-GCM output.
	// A random 96-bit nonce is safe here: a root version wraps at most a few
	// thousand bucket keys per epoch, far below GCM's 2^32 random-nonce bound.
	headerSize = 4 + nonceSize
)

var _ keystore.RootStore = (*Store)(nil)

// Store is a root store kept in a local file.
type Store struct {
	path string

	mu       sync.RWMutex
	versions map[int][]byte
	latest   int
	min      int
}

type fileForm struct {
	Format     string            `json:"format"`
	MinVersion int               `json:"min_version"`
	Latest     int               `json:"latest"`
	Versions   map[string]string `json:"versions"`
}

// Open opens the root file at path, creating it with a first version (mode
// 0600) when it does not exist. A leftover file from an interrupted trim is
// overwritten and removed.
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	if err := destroyFile(path + ".old"); err != nil {
		return nil, fmt.Errorf("local root: clean up: %w", err)
	}
	_ = os.Remove(path + ".tmp")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k := make([]byte, keySize)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		s.versions = map[int][]byte{1: k}
		s.latest, s.min = 1, 1
		if err := s.write(); err != nil {
			return nil, fmt.Errorf("local root: create: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("local root: read: %w", err)
	}
	if err := s.decode(b); err != nil {
		return nil, fmt.Errorf("local root: %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) decode(b []byte) error {
	var f fileForm
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%w: %v", keystore.ErrCorrupt, err)
	}
	if f.Format != fileFormat || f.Latest < 1 || f.MinVersion < 1 || f.MinVersion > f.Latest {
		return fmt.Errorf("%w: bad root file header", keystore.ErrCorrupt)
	}
	s.versions = make(map[int][]byte, len(f.Versions))
	for vs, ks := range f.Versions {
		v, err := strconv.Atoi(vs)
		if err != nil || v < f.MinVersion || v > f.Latest {
			return fmt.Errorf("%w: bad version %q", keystore.ErrCorrupt, vs)
		}
		k, err := base64.StdEncoding.DecodeString(ks)
		if err != nil || len(k) != keySize {
			return fmt.Errorf("%w: bad key for version %d", keystore.ErrCorrupt, v)
		}
		s.versions[v] = k
	}
	if _, ok := s.versions[f.Latest]; !ok {
		return fmt.Errorf("%w: latest version missing", keystore.ErrCorrupt)
	}
	s.latest, s.min = f.Latest, f.MinVersion
	return nil
}

// write replaces the root file atomically: temporary file, fsync, rename,
// fsync of the directory. Called with mu held for writing (or before sharing).
func (s *Store) write() error {
	f := fileForm{Format: fileFormat, MinVersion: s.min, Latest: s.latest, Versions: map[string]string{}}
	for v, k := range s.versions {
		f.Versions[strconv.Itoa(v)] = base64.StdEncoding.EncodeToString(k)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(s.path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// destroyFile overwrites a file's bytes with zeros, syncs, and removes it.
// A missing file is not an error.
func destroyFile(path string) error {
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := fh.Stat()
	if err == nil {
		_, err = fh.WriteAt(make([]byte, st.Size()), 0)
	}
	if err == nil {
		err = fh.Sync()
	}
	fh.Close()
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// Kind returns "local".
func (s *Store) Kind() string { return "local" }

func aad(v int) []byte {
	b := make([]byte, len(LabelWrap)+4)
	copy(b, LabelWrap)
	binary.BigEndian.PutUint32(b[len(LabelWrap):], uint32(v))
	return b
}

func gcm(k []byte) cipher.AEAD {
	c, err := aes.NewCipher(k)
	if err != nil {
		panic(err) // keys are always keySize bytes
	}
	a, err := cipher.NewGCM(c)
	if err != nil {
		panic(err)
	}
	return a
}

func (s *Store) wrapLocked(k []byte) (keystore.Wrapped, error) {
	v := s.latest
	out := make([]byte, headerSize, headerSize+len(k)+16)
	binary.BigEndian.PutUint32(out, uint32(v))
	if _, err := rand.Read(out[4:headerSize]); err != nil {
		return keystore.Wrapped{}, err
	}
	out = gcm(s.versions[v]).Seal(out, out[4:headerSize], k, aad(v))
	return keystore.Wrapped{Version: v, Blob: out}, nil
}

func (s *Store) unwrapLocked(b []byte) ([]byte, error) {
	if len(b) < headerSize+16 {
		return nil, fmt.Errorf("local root: unwrap: %w: short blob", keystore.ErrCorrupt)
	}
	v := int(binary.BigEndian.Uint32(b))
	k, ok := s.versions[v]
	if !ok {
		if v >= 1 && v < s.min {
			return nil, fmt.Errorf("local root: unwrap: version %d: %w", v, keystore.ErrVersionDestroyed)
		}
		return nil, fmt.Errorf("local root: unwrap: %w: unknown version %d", keystore.ErrCorrupt, v)
	}
	p, err := gcm(k).Open(nil, b[4:headerSize], b[headerSize:], aad(v))
	if err != nil {
		return nil, fmt.Errorf("local root: unwrap: %w", keystore.ErrCorrupt)
	}
	return p, nil
}

// Wrap wraps each key under the latest version.
func (s *Store) Wrap(_ context.Context, keys [][]byte) ([]keystore.Wrapped, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]keystore.Wrapped, len(keys))
	for i, k := range keys {
		w, err := s.wrapLocked(k)
		if err != nil {
			return nil, err
		}
		out[i] = w
	}
	return out, nil
}

// Unwrap unwraps each blob.
func (s *Store) Unwrap(_ context.Context, blobs [][]byte) ([][]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([][]byte, len(blobs))
	for i, b := range blobs {
		p, err := s.unwrapLocked(b)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// Rewrap re-encrypts each blob under the latest version.
func (s *Store) Rewrap(_ context.Context, blobs [][]byte) ([]keystore.Wrapped, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]keystore.Wrapped, len(blobs))
	for i, b := range blobs {
		p, err := s.unwrapLocked(b)
		if err != nil {
			return nil, err
		}
		w, err := s.wrapLocked(p)
		clear(p)
		if err != nil {
			return nil, err
		}
		out[i] = w
	}
	return out, nil
}

// Rotate adds a new latest version and persists it before returning.
func (s *Store) Rotate(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := make([]byte, keySize)
	if _, err := rand.Read(k); err != nil {
		return 0, err
	}
	s.versions[s.latest+1] = k
	s.latest++
	if err := s.write(); err != nil {
		delete(s.versions, s.latest)
		s.latest--
		return 0, fmt.Errorf("local root: rotate: %w", err)
	}
	return s.latest, nil
}

// Trim destroys every version below minVersion: the file is rewritten without
// them and the previous file's bytes are overwritten before it is unlinked.
// The order keeps a valid root file on disk at every instant of a crash.
func (s *Store) Trim(_ context.Context, minVersion int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if minVersion > s.latest {
		return nil, fmt.Errorf("local root: trim to %d above latest %d: %w", minVersion, s.latest, keystore.ErrInvalid)
	}
	if minVersion <= s.min {
		return nil, nil
	}
	var retired []int
	for v := range s.versions {
		if v < minVersion {
			retired = append(retired, v)
		}
	}
	sort.Ints(retired)
	old := s.path + ".old"
	if err := os.Link(s.path, old); err != nil {
		return nil, fmt.Errorf("local root: trim: %w", err)
	}
	prevMin, removed := s.min, map[int][]byte{}
	for _, v := range retired {
		removed[v] = s.versions[v]
		delete(s.versions, v)
	}
	s.min = minVersion
	if err := s.write(); err != nil {
		for v, k := range removed {
			s.versions[v] = k
		}
		s.min = prevMin
		_ = os.Remove(old)
		return nil, fmt.Errorf("local root: trim: %w", err)
	}
	for _, k := range removed {
		clear(k)
	}
	if err := destroyFile(old); err != nil {
		return retired, fmt.Errorf("local root: trim: destroy old file: %w", err)
	}
	return retired, nil
}

// Versions reports the latest and oldest available versions.
func (s *Store) Versions(_ context.Context) (keystore.Versions, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return keystore.Versions{Latest: s.latest, MinAvailable: s.min}, nil
}
