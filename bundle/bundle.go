// Package bundle is the regulator export of one forget (docs/transparency.md):
// a single gzip-compressed tar archive holding the erasure attestation,
// the transparency-log entries of the forget's lifecycle (key created,
// forget committed, holder acks, epoch completed, erasure attested) each
// with its c2sp.org/tlog-proof@v1 inclusion proof, the signed checkpoint
// those proofs are against, the public keys, optionally a consistency proof
// from a checkpoint the regulator saved earlier, and a README.txt saying
// how to check every file with shredd and with standard tools.
//
// Write and Read are the archive format; Verify is the offline check
// `shredd verify` runs. The package imports attest and translog, never the
// service: an export is checked with no access to shredd.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Errors. Read and Verify wrap exactly one of them (Verify also wraps the
// attest or translog error that failed).
var (
	// ErrFormat means the archive is not a well-formed export: not gzip or
	// tar, an unknown, missing, repeated or oversized file.
	ErrFormat = errors.New("malformed export")
	// ErrVerify means a check failed: a signature, an inclusion or
	// consistency proof, or the agreement between the files.
	ErrVerify = errors.New("export does not verify")
)

// Names of the files of an export, below its top directory.
const (
	FileReadme         = "README.txt"
	FileAttestation    = "attestation.json"
	FileAttestationPub = "attestation.pub"
	FileLogKey         = "log.vkey"
	FileCheckpoint     = "checkpoint"
	FileConsistency    = "consistency.proof"
	FileCheckInclusion = "check-inclusion.py"
)

// Limits Read enforces.
const (
	MaxFiles     = 10_000
	MaxFileSize  = 64 << 20  // the attestation can be large; everything else is small
	MaxTotalSize = 256 << 20 // uncompressed
	MaxEntrySize = 65535     // a log entry (translog.MaxEntrySize)
)

// Entry is one transparency-log entry of the export with its inclusion
// proof. Its files are entry-<Index>-<Event>.json and
// entry-<Index>-<Event>.tlog-proof.
type Entry struct {
	Index int64
	Event string // attest.EventKeyCreated, ...
	Data  []byte // the exact log entry: a signed event
	Proof []byte // c2sp.org/tlog-proof@v1 against Bundle.Checkpoint
}

// Bundle is the content of an export.
type Bundle struct {
	Forget         string // the forget's id; the top directory is shredd-export-<Forget>
	Attestation    []byte // the attestation file, byte for byte as logged
	AttestationPub []byte // PEM public key of the service (attest.MarshalPublicKey)
	LogKey         []byte // the log's note verifier key, one line
	Checkpoint     []byte // the signed checkpoint every proof is against
	Entries        []Entry
	Consistency    []byte // optional: consistency proof from an older tree size
	Created        time.Time
}

var (
	entryRe  = regexp.MustCompile(`^entry-(0|[1-9][0-9]{0,18})-([a-z_]{1,32})\.(json|tlog-proof)$`)
	forgetRe = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

//go:embed README.txt.tmpl
var readmeTmpl string

//go:embed check-inclusion.py
var checkInclusion []byte

// CheckInclusionScript returns the short, independent inclusion-proof
// checker (Python 3, standard library only) that every export carries.
func CheckInclusionScript() []byte { return slices.Clone(checkInclusion) }

// EntryName returns the base name (without extension) of an entry's files.
func (e *Entry) EntryName() string { return fmt.Sprintf("entry-%d-%s", e.Index, e.Event) }

// Readme returns the README.txt of b.
func (b *Bundle) Readme() []byte {
	var out bytes.Buffer
	t := template.Must(template.New("readme").Parse(readmeTmpl))
	if err := t.Execute(&out, b); err != nil {
		panic(err) // the template and its data are ours
	}
	return out.Bytes()
}

// Dir returns the archive's top directory.
func (b *Bundle) Dir() string { return "shredd-export-" + b.Forget }

// Write writes b as a gzip-compressed tar archive. Files are in a fixed
// order with fixed metadata (mode 0644, b.Created as their time), so the
// same bundle gives the same bytes.
func (b *Bundle) Write(w io.Writer) error {
	if !forgetRe.MatchString(b.Forget) {
		return fmt.Errorf("bundle: forget id %q: %w", b.Forget, ErrFormat)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.ModTime = b.Created
	tw := tar.NewWriter(zw)
	put := func(name string, data []byte) error {
		hdr := &tar.Header{Name: b.Dir() + "/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: b.Created.Truncate(time.Second),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{FileReadme, b.Readme()},
		{FileAttestation, b.Attestation},
		{FileAttestationPub, b.AttestationPub},
		{FileLogKey, b.LogKey},
		{FileCheckpoint, b.Checkpoint},
		{FileCheckInclusion, checkInclusion},
	}
	for _, e := range b.sortedEntries() {
		files = append(files, struct {
			name string
			data []byte
		}{e.EntryName() + ".json", e.Data}, struct {
			name string
			data []byte
		}{e.EntryName() + ".tlog-proof", e.Proof})
	}
	if b.Consistency != nil {
		files = append(files, struct {
			name string
			data []byte
		}{FileConsistency, b.Consistency})
	}
	for _, f := range files {
		if err := put(f.name, f.data); err != nil {
			return fmt.Errorf("bundle: write %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func (b *Bundle) sortedEntries() []Entry {
	es := slices.Clone(b.Entries)
	slices.SortFunc(es, func(x, y Entry) int {
		if x.Index != y.Index {
			return int(x.Index - y.Index)
		}
		return strings.Compare(x.Event, y.Event)
	})
	return es
}

// Read parses an export archive. Every file must be one Write makes, under
// one top directory shredd-export-<forget id>, each at most once and within
// the size limits; README.txt and check-inclusion.py are read but not
// trusted (Verify does not look at them). The error wraps ErrFormat.
func Read(r io.Reader) (*Bundle, error) {
	bad := func(format string, a ...any) (*Bundle, error) {
		return nil, fmt.Errorf("bundle: %s: %w", fmt.Sprintf(format, a...), ErrFormat)
	}
	zr, err := gzip.NewReader(io.LimitReader(r, MaxTotalSize))
	if err != nil {
		return bad("not a gzip archive: %v", err)
	}
	tr := tar.NewReader(zr)
	b := &Bundle{}
	seen := map[string]bool{}
	entries := map[string]*Entry{}
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bad("not a tar archive: %v", err)
		}
		// Everything is in the one top directory shredd-export-<forget id>;
		// a directory member may only be that one: tar xzf, which the
		// README tells regulators to run, would create any other.
		isDir := hdr.Typeflag == tar.TypeDir
		dir, name := path.Split(strings.TrimSuffix(hdr.Name, "/"))
		if isDir {
			dir, name = name, ""
		}
		forget, ok := strings.CutPrefix(strings.TrimSuffix(dir, "/"), "shredd-export-")
		if !ok || !forgetRe.MatchString(forget) || (b.Forget != "" && forget != b.Forget) {
			return bad("%q is not in one shredd-export-<forget id> directory", hdr.Name)
		}
		b.Forget = forget
		if isDir {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return bad("%q is not a regular file", hdr.Name)
		}
		if len(seen) == MaxFiles {
			return bad("more than %d files", MaxFiles)
		}
		if seen[name] {
			return bad("%s appears twice", name)
		}
		seen[name] = true
		if hdr.Size < 0 || hdr.Size > MaxFileSize {
			return bad("%s is over %d bytes", name, MaxFileSize)
		}
		if total += hdr.Size; total > MaxTotalSize {
			return bad("over %d bytes in all", MaxTotalSize)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil || int64(len(data)) != hdr.Size {
			return bad("%s is truncated", name)
		}
		switch name {
		case FileReadme, FileCheckInclusion:
		case FileAttestation:
			b.Attestation = data
		case FileAttestationPub:
			b.AttestationPub = data
		case FileLogKey:
			b.LogKey = data
		case FileCheckpoint:
			b.Checkpoint = data
		case FileConsistency:
			b.Consistency = data
		default:
			m := entryRe.FindStringSubmatch(name)
			if m == nil {
				return bad("unknown file %s", name)
			}
			if len(data) > MaxEntrySize {
				return bad("%s is over %d bytes", name, MaxEntrySize)
			}
			idx, _ := strconv.ParseInt(m[1], 10, 64)
			base := strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".tlog-proof")
			e := entries[base]
			if e == nil {
				e = &Entry{Index: idx, Event: m[2]}
				entries[base] = e
			}
			if m[3] == "json" {
				e.Data = data
			} else {
				e.Proof = data
			}
		}
		if b.Created.IsZero() || hdr.ModTime.After(b.Created) {
			b.Created = hdr.ModTime
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{FileAttestation, b.Attestation}, {FileAttestationPub, b.AttestationPub}, {FileLogKey, b.LogKey}, {FileCheckpoint, b.Checkpoint}} {
		if f.data == nil {
			return bad("%s is missing", f.name)
		}
	}
	for base, e := range entries {
		if e.Data == nil || e.Proof == nil {
			return bad("%s needs both its .json and its .tlog-proof", base)
		}
		b.Entries = append(b.Entries, *e)
	}
	b.Entries = b.sortedEntries()
	return b, nil
}
