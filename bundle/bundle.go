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
			Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
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

// Read parses an export archive strictly (docs/transparency.md, "Reading
// an export strictly"): one gzip member, a POSIX ustar archive (Gunzip,
// Untar), every file in the one top directory shredd-export-<forget id>
// (which may also appear as a directory member), each a name Write makes,
// every file Write always makes present, each entry with both its files.
// README.txt and check-inclusion.py are read but not trusted (Verify does
// not look at them). The error is an *Error wrapping ErrFormat.
func Read(r io.Reader) (*Bundle, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxTotalSize+1))
	if err != nil {
		return nil, fmt.Errorf("bundle: read: %v: %w", err, ErrFormat)
	}
	if len(data) > MaxTotalSize {
		return nil, formatError(ReasonGzipTooLarge, "over %d bytes", MaxTotalSize)
	}
	return ReadBytes(data)
}

// ReadBytes is Read of an export held in memory.
func ReadBytes(data []byte) (*Bundle, error) {
	tarData, err := Gunzip(data)
	if err != nil {
		return nil, err
	}
	members, err := Untar(tarData)
	if err != nil {
		return nil, err
	}
	b := &Bundle{}
	files := map[string][]byte{}
	entries := map[string]*Entry{}
	var total int64
	for _, m := range members {
		name, err := b.place(m)
		if err != nil {
			return nil, err
		}
		if m.Dir {
			continue
		}
		data := m.Data
		total += int64(len(data))
		switch name {
		case FileReadme, FileCheckInclusion, FileAttestation, FileAttestationPub, FileLogKey, FileCheckpoint, FileConsistency:
			files[name] = data
		default:
			if err := addEntryFile(entries, name, data); err != nil {
				return nil, err
			}
		}
		if t := time.Unix(m.Mtime, 0).UTC(); b.Created.IsZero() || t.After(b.Created) {
			b.Created = t
		}
	}
	if total > MaxTotalSize {
		return nil, formatError(ReasonFileSize, "over %d bytes in all", MaxTotalSize)
	}
	for _, f := range []string{FileReadme, FileAttestation, FileAttestationPub, FileLogKey, FileCheckpoint, FileCheckInclusion} {
		if files[f] == nil {
			return nil, formatError(ReasonMissingFile, "%s is missing", f)
		}
	}
	b.Attestation, b.AttestationPub, b.LogKey, b.Checkpoint, b.Consistency =
		files[FileAttestation], files[FileAttestationPub], files[FileLogKey], files[FileCheckpoint], files[FileConsistency]
	for _, e := range entries {
		b.Entries = append(b.Entries, *e)
	}
	b.Entries = b.sortedEntries()
	for _, e := range b.Entries {
		if e.Data == nil || e.Proof == nil {
			return nil, formatError(ReasonMissingFile, "%s needs both its .json and its .tlog-proof", e.EntryName())
		}
	}
	return b, nil
}

// place checks where member m of the archive is: everything is in the one
// top directory shredd-export-<forget id> (which sets b.Forget); a
// directory member may only be that one: tar xzf, which the README tells
// regulators to run, would create any other. It returns the name of m in
// that directory ("" for the directory).
func (b *Bundle) place(m Member) (string, error) {
	dir, name, _ := strings.Cut(m.Name, "/")
	forget, ok := strings.CutPrefix(dir, "shredd-export-")
	if !ok || !forgetRe.MatchString(forget) || (b.Forget != "" && forget != b.Forget) ||
		strings.Contains(name, "/") || (m.Dir && name != "") || (!m.Dir && name == "") {
		return "", formatError(ReasonLayout, "%q is not a file of one shredd-export-<forget id> directory", m.Name)
	}
	b.Forget = forget
	return name, nil
}

// addEntryFile adds the file name (an entry's .json or .tlog-proof) to
// its entry in entries, by the entry's base name.
func addEntryFile(entries map[string]*Entry, name string, data []byte) error {
	em := entryRe.FindStringSubmatch(name)
	if em == nil {
		return formatError(ReasonUnknownFile, "unknown file %s", name)
	}
	if len(data) > MaxEntrySize {
		return formatError(ReasonFileSize, "%s is over %d bytes", name, MaxEntrySize)
	}
	idx, err := strconv.ParseInt(em[1], 10, 64)
	if err != nil || idx > MaxSafeInteger {
		return formatError(ReasonUnknownFile, "unknown file %s", name)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".tlog-proof")
	e := entries[base]
	if e == nil {
		e = &Entry{Index: idx, Event: em[2]}
		entries[base] = e
	}
	if em[3] == "json" {
		e.Data = data
	} else {
		e.Proof = data
	}
	return nil
}
