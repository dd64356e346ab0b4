// Package local is the embedded root store of shredd: the root key versions
// live in one file (mode 0600) in the data directory. It implements
// keystore.RootStore; Vault Transit is the production alternative.
//
// Every change writes a fresh file, fsyncs it, renames it over the live one
// and fsyncs the directory, so a kill at any instant leaves one valid root
// file. Destroying a version also overwrites the replaced file's bytes. On journaling or copy-on-write file
// systems and on flash, old blocks may survive below the file system; the
// operations guide states this residual, and the Vault root store avoids it.
package local

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
)

// LabelWrap is the domain-separation label bound into every wrap as
// associated data, together with the version.
const LabelWrap = "shredd/v1/root-wrap"

const (
	// fileFormat is written; fileFormatV1 (before 2026-12) is read too:
	// it kept the forget ledger's head in a field of its own (ledger_head),
	// which a v2 file keeps as the mark of stream LegacyHeadStream.
	fileFormat   = "shredd-root/v2"
	fileFormatV1 = "shredd-root/v1"
	keySize      = 32
	nonceSize    = 12
	// A blob is version (4 bytes, big-endian) ‖ nonce (12) ‖ AES-256-GCM output.
	// A random 96-bit nonce is safe here: a root version wraps at most a few
	// thousand bucket keys per epoch, far below GCM's 2^32 random-nonce bound.
	headerSize = 4 + nonceSize
)

var _ keystore.RootStore = (*Root)(nil)

// Root is a root store kept in a local file.
type Root struct {
	path string

	mu       sync.RWMutex
	versions map[int][]byte
	latest   int
	min      int
	marks    map[string]json.RawMessage
	instance string   // the root's identity (fileForm.Instance); "" for a file of an earlier release until its first write
	gen      uint64   // the writer generation this process read or wrote last
	onDisk   [32]byte // SHA-256 of the file's bytes as this process read or wrote them last
	fenced   error    // set once the file was found changed by someone else: no more writes
	claiming bool     // Claim is writing (its own crash points)
	// pendingCleanUp: the leftovers of interrupted writes were judged
	// harmless at open (openChecked) and Claim removes them.
	pendingCleanUp bool
}

type fileForm struct {
	Format     string            `json:"format"`
	MinVersion int               `json:"min_version"`
	Latest     int               `json:"latest"`
	Versions   map[string]string `json:"versions"`
	// LedgerHead is read from v1 files only (the forget ledger's head of
	// releases before 2026-12), and becomes the mark LegacyHeadStream.
	LedgerHead json.RawMessage `json:"ledger_head,omitempty"`
	// Instance is the root's random identity (32 hex digits), made with
	// the file and never changed: the database pins it, so that another
	// instance's root file, or a new one, put in this one's place is a
	// refused start. Files of releases before 2026-12 have none until
	// their first write (Claim) gives them one.
	Instance string `json:"instance,omitempty"`
	// Generation is the writer generation: each process that serves the
	// data directory raises it once at start (Claim), and every later
	// write of that process checks that the file still holds its
	// generation and the bytes it wrote last, so that a second process
	// can never write the root from a memory the first has moved past.
	Generation uint64 `json:"generation,omitempty"`
	// Destroyed lists the versions an epoch destroyed (every version
	// below MinVersion, as numbers: no key bytes), so that a file that
	// holds one again is recognised as a resurrection, not a new version.
	Destroyed []int `json:"destroyed,omitempty"`
	// Marks are the high-water marks of durable streams kept beside the
	// root (keystore.MarkKeeper), by stream name, each opaque to the root.
	Marks map[string]json.RawMessage `json:"marks,omitempty"`
}

// maxFileSize bounds the root file: a few thousand versions at most.
const maxFileSize = 1 << 20

// Errors of the local root store.
var (
	// ErrConflict means the data directory holds root material that
	// disagrees with the live root file: shredd refuses to guess which one
	// is right.
	ErrConflict = errors.New("conflicting root files")
	// ErrFenced means the root file changed under this process since it
	// read or wrote it last (another process claimed it, or it was
	// replaced): this process writes it no more. Errors wrapping it also
	// wrap shredd.ErrUnavailable, so that the API answers 503.
	ErrFenced = errors.New("root file written by another process")
)

// Open opens the root file at path, creating it with a first version (mode
// 0600) when it does not exist and no leftover of an interrupted write does
// either.
//
// The file is never followed through a symlink and must be a regular file
// that only its owner can read and write (datadir.ErrUnsafe otherwise).
// Leftovers of a write a crash interrupted (path.tmp-*, and path.old and
// path.tmp of releases before 2026-12) are judged by their contents: one
// that holds only versions the live file also holds, versions it retired,
// or versions above its latest (a rotation that never returned) is
// overwritten and removed; a second name of the live file is only
// unlinked; anything else stops the start with ErrConflict, touching
// nothing.
func Open(path string) (*Root, error) {
	s := &Root{path: path}
	b, err := datadir.Read(path, datadir.Secret, maxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		left, err := leftovers(path)
		if err != nil {
			return nil, fmt.Errorf("local root: %w", err)
		}
		if len(left) > 0 {
			return nil, fmt.Errorf("local root: %s is missing but %s exists: %w; a new root would open no existing key, so none is created: restore %s, or move the leftover files away if this data directory is new",
				path, strings.Join(left, ", "), ErrConflict, filepath.Base(path))
		}
		k := make([]byte, keySize)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		s.versions = map[int][]byte{1: k}
		s.latest, s.min = 1, 1
		if s.instance, err = newInstance(); err != nil {
			return nil, err
		}
		b := s.encode()
		if err := datadir.Create(path, b, datadir.Secret); err != nil {
			return nil, fmt.Errorf("local root: create: %w", err)
		}
		s.onDisk = sha256.Sum256(b)
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("local root: %w", err)
	}
	return openExisting(path, b, false)
}

// openExisting opens the existing root file at path, whose bytes are b,
// and judges the leftovers of interrupted writes beside it: Open removes
// the harmless ones at once; with deferCleanUp (OpenBeside) none is
// removed before Claim, once the start's checks have passed.
func openExisting(path string, b []byte, deferCleanUp bool) (*Root, error) {
	s := &Root{path: path}
	if err := s.decode(b); err != nil {
		return nil, fmt.Errorf("local root: %s: %w", path, err)
	}
	if err := s.cleanUp(deferCleanUp); err != nil {
		return nil, fmt.Errorf("local root: %w", err)
	}
	s.pendingCleanUp = deferCleanUp
	return s, nil
}

// OpenBeside is Open for the root file of a data directory whose database
// is dbPath: when the root file is missing but the database exists, it
// refuses to create a new root (ErrConflict), which would open none of the
// database's keys.
func OpenBeside(path, dbPath string) (*Root, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(dbPath); err == nil {
			return nil, fmt.Errorf("local root: %s is missing but the database %s exists: %w; a new root would open none of its keys, so none is created: put back the root file that goes with this database",
				path, dbPath, ErrConflict)
		}
		return Open(path)
	}
	// An existing root: its leftovers are judged now and removed by Claim,
	// so that a start refused by a later check leaves them as they were.
	b, err := datadir.Read(path, datadir.Secret, maxFileSize)
	if err != nil {
		return nil, fmt.Errorf("local root: %w", err)
	}
	return openExisting(path, b, true)
}

// readRoot reads the root file at path without opening it as a store:
// nothing is created, cleaned up or changed, and its key bytes are
// cleared (the readers need its versions, head and marks only).
func readRoot(path string) (*Root, error) {
	b, err := datadir.Read(path, datadir.Secret, maxFileSize)
	if err != nil {
		return nil, fmt.Errorf("local root: %w", err)
	}
	s := &Root{path: path}
	if err := s.decode(b); err != nil {
		return nil, fmt.Errorf("local root: %s: %w", path, err)
	}
	for _, k := range s.versions {
		clear(k)
	}
	return s, nil
}

// ReadVersions reads the versions of the root file at path without opening
// it as a store: nothing is created, cleaned up or changed.
func ReadVersions(path string) (keystore.Versions, error) {
	s, err := readRoot(path)
	if err != nil {
		return keystore.Versions{}, err
	}
	return keystore.Versions{Latest: s.latest, MinAvailable: s.min}, nil
}

// leftovers lists the names beside path that an interrupted write may have
// left: path.tmp-* (this release), path.old and path.tmp (earlier ones).
func leftovers(path string) ([]string, error) {
	left, err := datadir.Leftovers(path)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{path + ".old", path + ".tmp"} {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return left, nil
}

// cleanUp removes the leftovers of interrupted writes, deciding from their
// contents (see Open).
func (s *Root) cleanUp(judgeOnly bool) error {
	left, err := leftovers(s.path)
	if err != nil || len(left) == 0 {
		return err
	}
	live, err := os.Lstat(s.path)
	if err != nil {
		return err
	}
	for _, p := range left {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: %w: not a regular file (%v); remove it (rm %s) and start again", p, datadir.ErrUnsafe, fi.Mode().Type(), p)
		}
		if os.SameFile(fi, live) {
			// A second name of the live root (a trim of an earlier release
			// killed between its link and its rename): drop the name only.
			if judgeOnly {
				continue
			}
			if err := os.Remove(p); err != nil {
				return err
			}
			if err := datadir.SyncDir(filepath.Dir(p)); err != nil {
				return err
			}
			continue
		}
		b, err := datadir.Read(p, datadir.Secret, maxFileSize)
		if err != nil {
			return err
		}
		var o Root
		if o.decode(b) == nil {
			if o.instance != "" && s.instance != "" && o.instance != s.instance {
				for _, k := range o.versions {
					clear(k)
				}
				return fmt.Errorf("%s is the root file of another instance (%s; this one is %s): %w; nothing was changed: move it out of the data directory (it is no leftover of this root's writes)",
					p, o.instance, s.instance, ErrConflict)
			}
			for v, k := range o.versions {
				if v < s.min || v > s.latest {
					continue // retired by a trim, or a rotation that never returned
				}
				if lk, ok := s.versions[v]; !ok || !bytes.Equal(lk, k) {
					return fmt.Errorf("%s holds root version %d, which %s lacks or holds with other bytes: %w; nothing was changed: keep both files and compare them before removing either",
						p, v, s.path, ErrConflict)
				}
			}
		}
		// Redundant, or a partial write that never became the root.
		if judgeOnly {
			continue
		}
		if err := datadir.Destroy(p); err != nil {
			return err
		}
	}
	return nil
}

func (s *Root) decode(b []byte) error {
	var f fileForm
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%w: %v", keystore.ErrCorrupt, err)
	}
	if f.Format != fileFormat && f.Format != fileFormatV1 || f.Latest < 1 || f.MinVersion < 1 || f.MinVersion > f.Latest {
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
	if f.Instance != "" && !validInstance(f.Instance) {
		return fmt.Errorf("%w: bad instance %q", keystore.ErrCorrupt, f.Instance)
	}
	for _, v := range f.Destroyed {
		if v >= f.MinVersion {
			return fmt.Errorf("%w: root version %d is recorded as destroyed, yet the file holds it or names it available (its oldest version is %d): a destroyed version was put back",
				keystore.ErrCorrupt, v, f.MinVersion)
		}
	}
	s.latest, s.min = f.Latest, f.MinVersion
	s.instance, s.gen, s.marks = f.Instance, f.Generation, nil
	if f.Format == fileFormat && len(f.LedgerHead) > 0 {
		// shredd never writes it in a v2 file: an edit, which would
		// otherwise be read as nothing.
		return fmt.Errorf("%w: a ledger_head field in a %s file (the head is the mark %q there): the file was edited", keystore.ErrCorrupt, fileFormat, LegacyHeadStream)
	}
	if f.Format == fileFormatV1 && len(f.LedgerHead) > 0 && string(f.LedgerHead) != "null" {
		// A v1 file is its writer's (a release that keeps ledger_head and
		// passes marks through unread): its ledger_head is the head, over
		// any mark of the stream a later release left in it.
		h, err := legacyHead(f.LedgerHead)
		if err != nil {
			return err
		}
		if f.Marks == nil {
			f.Marks = map[string]json.RawMessage{}
		}
		f.Marks[LegacyHeadStream] = h
	}
	for k, m := range f.Marks {
		var c bytes.Buffer
		if err := json.Compact(&c, m); err != nil {
			return fmt.Errorf("%w: bad mark %q", keystore.ErrCorrupt, k)
		}
		if s.marks == nil {
			s.marks = map[string]json.RawMessage{}
		}
		s.marks[k] = c.Bytes()
	}
	s.onDisk = sha256.Sum256(b)
	return nil
}

// validInstance reports whether id is an instance identity: 32 lower-case
// hex digits.
func validInstance(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// newInstance returns a fresh random instance identity.
func newInstance() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// encode returns the root file's contents. Called with mu held (or before
// sharing).
func (s *Root) encode() []byte {
	f := fileForm{Format: fileFormat, MinVersion: s.min, Latest: s.latest, Versions: map[string]string{},
		Instance: s.instance, Generation: s.gen, Marks: s.marks}
	for v, k := range s.versions {
		f.Versions[strconv.Itoa(v)] = base64.StdEncoding.EncodeToString(k)
	}
	for v := 1; v < s.min; v++ {
		f.Destroyed = append(f.Destroyed, v)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic(err) // strings and ints only
	}
	return b
}

// write replaces the root file: a fresh file (random name, O_EXCL) written
// and fsynced, renamed over the live one, the directory fsynced. The live
// root never has a second name. When destroyOld is set, the replaced file's
// bytes are overwritten, once the new file is durable, through a descriptor
// opened before the rename. Called with mu held for writing.
func (s *Root) write(destroyOld bool) error {
	if err := s.fence(); err != nil {
		return err
	}
	var old *os.File
	if destroyOld {
		f, err := datadir.OpenForDestroy(s.path, datadir.Secret)
		if err != nil {
			return err
		}
		defer f.Close()
		old = f
	}
	b := s.encode()
	tmp, err := datadir.WriteTemp(s.path, b, datadir.Secret)
	if err != nil {
		return err
	}
	if s.claiming {
		crashpoint.Hit("localroot:claimsynced")
	} else {
		crashpoint.Hit("localroot:synced")
	}
	if err := datadir.Commit(tmp, s.path); err != nil {
		return err
	}
	s.onDisk = sha256.Sum256(b)
	if s.claiming {
		crashpoint.Hit("localroot:claimed")
	} else {
		crashpoint.Hit("localroot:renamed")
	}
	if old != nil {
		// The old file has no name left; its blocks are freed when it is
		// closed. Overwrite them first.
		if err := datadir.Overwrite(old); err != nil {
			return errOldBytes{err}
		}
	}
	return nil
}

// fence reads the root file back before a write and refuses the write
// when it is not the file this process read or wrote last: root versions
// are never written from memory over a file someone else moved on. Once
// fenced, every later write is refused too. Called with mu held for
// writing.
func (s *Root) fence() error {
	if s.fenced != nil {
		return s.fenced
	}
	b, err := datadir.Read(s.path, datadir.Secret, maxFileSize)
	if err != nil {
		return fmt.Errorf("local root: read back before writing: %w: %w", shredd.ErrUnavailable, err)
	}
	if sha256.Sum256(b) == s.onDisk {
		return nil
	}
	what := "its contents are not what this process wrote or read last"
	var o Root
	if o.decode(b) == nil {
		switch {
		case s.instance != "" && o.instance != s.instance:
			what = fmt.Sprintf("it is now another root (instance %q, this process's is %q)", o.instance, s.instance)
		case o.gen > s.gen:
			what = fmt.Sprintf("another process claimed it (writer generation %d, this process's is %d)", o.gen, s.gen)
		case o.latest < s.latest || o.min < s.min:
			what = fmt.Sprintf("it went back (versions %d..%d, this process's are %d..%d)", o.min, o.latest, s.min, s.latest)
		}
		for _, k := range o.versions {
			clear(k)
		}
	}
	s.fenced = fmt.Errorf("local root: %s changed under this process: %s: %w (%w); this process writes it no more: stop every shredd on this data directory, check that root.key is this instance's, and start one again",
		s.path, what, ErrFenced, shredd.ErrUnavailable)
	return s.fenced
}

// Claim makes this process the root file's writer: it raises the file's
// writer generation (and gives a file of an earlier release its instance
// identity), after checking that the file is still what Open read. A
// process whose Claim succeeded is the only one whose writes the file
// accepts until another process claims it: an earlier writer's next write
// is refused (ErrFenced). shredd serve claims the root once per start,
// after its checks and before it writes anything else.
func (s *Root) Claim() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendingCleanUp {
		if err := s.cleanUp(false); err != nil {
			return fmt.Errorf("local root: %w", err)
		}
		s.pendingCleanUp = false
	}
	prevInst := s.instance
	if s.instance == "" {
		id, err := newInstance()
		if err != nil {
			return err
		}
		s.instance = id
	}
	s.gen++
	s.claiming = true
	err := s.write(false)
	s.claiming = false
	if err != nil {
		s.gen--
		s.instance = prevInst
		return fmt.Errorf("local root: claim: %w", err)
	}
	return nil
}

// Instance returns the root file's instance identity: "" for a file of a
// release before 2026-12 that no process has claimed yet.
func (s *Root) Instance() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.instance
}

// CheckFence reads the root file back and fences this process (ErrFenced,
// from then on) when another process changed it, without writing: the
// node asks every few seconds, so that a process that lost the root stops
// answering even while it writes nothing to it.
func (s *Root) CheckFence() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.fence()
	if errors.Is(err, ErrFenced) {
		return err
	}
	return nil // unreadable now: the next write says so
}

// WriteErr returns ErrFenced (wrapped, with what changed) once a write
// found the root file changed under this process, nil until then.
func (s *Root) WriteErr() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.fenced
}

// Generation returns the writer generation this process holds.
func (s *Root) Generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

var _ keystore.MarkKeeper = (*Root)(nil)

// legacyHead reads a v1 file's ledger_head as its releases did (a field
// of the wrong type is a corrupt file, refused) and returns it as the
// mark's JSON.
func legacyHead(raw json.RawMessage) (json.RawMessage, error) {
	var h struct {
		Instance string `json:"instance"`
		Seq      uint64 `json:"seq"`
		Hash     string `json:"hash"`
		Lines    uint64 `json:"lines"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("%w: %v", keystore.ErrCorrupt, err)
	}
	return json.Marshal(h)
}

// LegacyHeadStream is the stream whose mark a v1 root file's ledger_head
// field becomes when read: the name the forget ledger keeps its head under
// (package ledger's user in erasure), so that a data directory of an
// earlier release keeps its head across the upgrade.
const LegacyHeadStream = "forget-ledger"

// Mark returns the high-water mark kept for stream, or an error wrapping
// keystore.ErrNotFound when none was kept.
func (s *Root) Mark(_ context.Context, stream string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.marks[stream]
	if !ok {
		return nil, fmt.Errorf("local root: mark %q: %w", stream, keystore.ErrNotFound)
	}
	return bytes.Clone(m), nil
}

// KeepMark records mark (a JSON value) as stream's high-water mark in the
// root file (a fresh file, fsynced and renamed, as every change of the
// root: see write).
func (s *Root) KeepMark(_ context.Context, stream string, mark []byte) error {
	var c bytes.Buffer
	if err := json.Compact(&c, mark); err != nil {
		return fmt.Errorf("local root: mark %q: not JSON: %w", stream, shredd.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.marks[stream]
	if s.marks == nil {
		s.marks = map[string]json.RawMessage{}
	}
	s.marks[stream] = c.Bytes()
	if err := s.write(false); err != nil {
		if had {
			s.marks[stream] = prev
		} else {
			delete(s.marks, stream)
		}
		return fmt.Errorf("local root: keep mark %q: %w", stream, err)
	}
	return nil
}

// ReadMark reads stream's mark from the root file at path without opening
// it as a store; keystore.ErrNotFound when none was kept.
func ReadMark(path, stream string) ([]byte, error) {
	s, err := readRoot(path)
	if err != nil {
		return nil, err
	}
	return s.Mark(context.Background(), stream)
}

// errOldBytes means the new root file is in place and only overwriting the
// replaced one failed.
type errOldBytes struct{ err error }

func (e errOldBytes) Error() string { return "overwrite the replaced root file: " + e.err.Error() }
func (e errOldBytes) Unwrap() error { return e.err }

// Describe returns the file's versions, with no Name: the local root is a
// file, not a named key of a backend.
func (s *Root) Describe() keystore.KeyDescription {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return keystore.KeyDescription{MinAvailableVersion: s.min, LatestVersion: s.latest}
}

// Kind returns "local".
func (s *Root) Kind() string { return "local" }

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

func (s *Root) wrapLocked(k []byte) (keystore.Wrapped, error) {
	v := s.latest
	out := make([]byte, headerSize, headerSize+len(k)+16)
	binary.BigEndian.PutUint32(out, uint32(v))
	if _, err := rand.Read(out[4:headerSize]); err != nil {
		return keystore.Wrapped{}, err
	}
	out = gcm(s.versions[v]).Seal(out, out[4:headerSize], k, aad(v))
	return keystore.Wrapped{Version: v, Blob: out}, nil
}

func (s *Root) unwrapLocked(b []byte) ([]byte, error) {
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
func (s *Root) Wrap(_ context.Context, keys [][]byte) ([]keystore.Wrapped, error) {
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
func (s *Root) Unwrap(_ context.Context, blobs [][]byte) ([][]byte, error) {
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
func (s *Root) Rewrap(_ context.Context, blobs [][]byte) ([]keystore.Wrapped, error) {
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
func (s *Root) Rotate(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := make([]byte, keySize)
	if _, err := rand.Read(k); err != nil {
		return 0, err
	}
	s.versions[s.latest+1] = k
	s.latest++
	if err := s.write(false); err != nil {
		delete(s.versions, s.latest)
		s.latest--
		return 0, fmt.Errorf("local root: rotate: %w", err)
	}
	return s.latest, nil
}

// Trim destroys every version below minVersion: a new file without them
// replaces the root file (see write), and then the replaced file's bytes are
// overwritten through a descriptor opened before the rename. At every
// instant of a crash the live name holds a valid root: the old one (Open
// destroys the fresh leftover) or the new one (the old bytes are then
// unreachable by name, though they may linger in free blocks).
func (s *Root) Trim(_ context.Context, minVersion int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if minVersion > s.latest {
		return nil, fmt.Errorf("local root: trim to %d above latest %d: %w", minVersion, s.latest, shredd.ErrInvalid)
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
	prevMin, removed := s.min, map[int][]byte{}
	for _, v := range retired {
		removed[v] = s.versions[v]
		delete(s.versions, v)
	}
	s.min = minVersion
	if err := s.write(true); err != nil {
		var ob errOldBytes
		if errors.As(err, &ob) {
			// The versions are gone from the root file; their old bytes
			// may linger in free blocks (the residual of docs/operations.md).
			for _, k := range removed {
				clear(k)
			}
			return retired, fmt.Errorf("local root: trim: %w", err)
		}
		for v, k := range removed {
			s.versions[v] = k
		}
		s.min = prevMin
		return nil, fmt.Errorf("local root: trim: %w", err)
	}
	for _, k := range removed {
		clear(k)
	}
	return retired, nil
}

// Versions reports the latest and oldest available versions.
func (s *Root) Versions(_ context.Context) (keystore.Versions, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return keystore.Versions{Latest: s.latest, MinAvailable: s.min}, nil
}
