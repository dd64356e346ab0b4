package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/translog"
)

// fixed returns SHA-256 of a test label: keys, salts and ids that are the
// same on every run.
func fixed(label string) []byte {
	d := sha256.Sum256([]byte("shredd/bundle/test/" + label))
	return d[:]
}

const (
	testSubject = "alice@example.com"
	testForget  = "3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c"
	testOrigin  = "shredd/bundle-test"
)

var testCreated = time.Date(2026, 3, 1, 10, 6, 30, 0, time.UTC)

// testExport is a real export made the way the service makes one: signed
// events appended to a translog.Log in a SQLite database, inclusion proofs
// against one checkpoint, a consistency proof from a checkpoint saved
// before the forget.
type testExport struct {
	b    *bundle.Bundle
	opts bundle.Options // the keys, subject, salt and saved checkpoint that verify it
}

// makeExport builds the export of a forget of testSubject: another
// subject's key, alice's key (the saved checkpoint is taken here), her
// forget, a holder's signed ack, the epoch, the attestation, then one more
// event of another subject.
func makeExport(t testing.TB) testExport {
	t.Helper()
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(fixed("attestation-key"))
	pub := key.Public().(ed25519.PublicKey)
	holder := ed25519.NewKeyFromSeed(fixed("holder-key"))
	salt := fixed("salt")
	commitment := attest.Commit(testSubject, salt)
	skey, vkey, err := note.GenerateKey(bytes.NewReader(fixed("log-key")), testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lg, err := translog.Open(ctx, db, signer)
	if err != nil {
		t.Fatal(err)
	}
	clock := testCreated.Add(-time.Hour)
	appendEvent := func(ev attest.Event) int64 {
		t.Helper()
		ev.Type, ev.Time = attest.EventType, clock
		clock = clock.Add(time.Minute)
		entry, err := attest.SignEvent(ev, key)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := lg.Append(ctx, tx, entry)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return idx
	}

	heldID, sealedID := "a7e4b2c9d1f0436e8b5a2c7d9e1f3b40", "5d2e9c0a41b7f3e86c1a0b2d4f6e8a13"
	ack, err := attest.SignAck(testForget, "ann-1", []string{heldID}, holder)
	if err != nil {
		t.Fatal(err)
	}
	var conds []attest.Condition
	for _, name := range attest.Conditions() {
		conds = append(conds, attest.Condition{Name: name, Status: attest.StatusOK, Evidence: "proven by the bundle test"})
	}
	st := attest.NewStatement(commitment, attest.Predicate{
		Forget: testForget,
		Claim:  attest.Claim,
		Timeline: attest.Timeline{Requested: testCreated.Add(-30 * time.Minute), Committed: testCreated.Add(-30 * time.Minute),
			Shredded: testCreated.Add(-10 * time.Minute), Erased: testCreated},
		KeyEvidence: attest.KeyEvidence{RootStore: attest.RootStoreLocal, RetiredRootVersions: []int{1}, Epoch: 1},
		Artifacts: []attest.Artifact{
			{ID: sealedID, Kind: "episodic", ClosedBy: attest.ClosedSealedKeyDestroyed},
			{ID: heldID, Kind: "embedding", Holder: "ann-1", ClosedBy: attest.ClosedHolderAck, AckSignature: ack.Signature},
		},
		Conditions: conds,
		HolderAcks: []attest.HolderAck{ack},
		Residuals: []attest.Residual{
			{Kind: attest.ResidualRootStoreSnapshots, Description: "backups of the data directory from before the epoch hold root version 1"},
			{Kind: attest.ResidualHolderTrust, Description: "ann-1 signed that it purged its plaintext copy; shredd cannot observe its storage"},
		},
	})
	env, err := attest.Sign(st, key)
	if err != nil {
		t.Fatal(err)
	}
	att, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}

	appendEvent(attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: attest.Commit("bob@example.com", fixed("bob")), Generation: 1}})
	keyIdx := appendEvent(attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: commitment, Generation: 1}})
	saved, err := lg.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	savedSize := keyIdx + 1
	idxs := []int64{keyIdx,
		appendEvent(attest.Event{Event: attest.EventForgetCommitted, Forget: &attest.ForgetEvent{Forget: testForget, Subject: commitment,
			Generation: 1, Barrier: 2, KeyCreated: keyIdx}}),
	}
	ackEv := attest.NewAckEvent(testForget, ack)
	idxs = append(idxs,
		appendEvent(attest.Event{Event: attest.EventHolderAck, Ack: &ackEv}),
		appendEvent(attest.Event{Event: attest.EventEpochCompleted, Epoch: &attest.EpochEvent{Epoch: 1, RootStore: attest.RootStoreLocal,
			FromVersion: 1, ToVersion: 2, Retired: []int{1}}}),
		appendEvent(attest.Event{Event: attest.EventErasureAttested, Attested: &attest.AttestedEvent{Forget: testForget, Subject: commitment,
			AttestationSHA256: attest.Digest(att)}}),
	)
	appendEvent(attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: attest.Commit("carol@example.com", fixed("carol")), Generation: 1}})

	size, err := lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := attest.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle.Bundle{Forget: testForget, Attestation: att, AttestationPub: pem, LogKey: []byte(vkey + "\n"), Created: testCreated}
	events := []string{attest.EventKeyCreated, attest.EventForgetCommitted, attest.EventHolderAck, attest.EventEpochCompleted, attest.EventErasureAttested}
	for i, idx := range idxs {
		data, err := lg.Entry(ctx, idx)
		if err != nil {
			t.Fatal(err)
		}
		proof, err := lg.Prove(ctx, idx, size)
		if err != nil {
			t.Fatal(err)
		}
		p, err := translog.ParseProof(proof)
		if err != nil {
			t.Fatal(err)
		}
		b.Checkpoint = p.Checkpoint
		b.Entries = append(b.Entries, bundle.Entry{Index: idx, Event: events[i], Data: data, Proof: proof})
	}
	hashes, err := lg.ProveConsistency(ctx, savedSize, size)
	if err != nil {
		t.Fatal(err)
	}
	b.Consistency = (&translog.ConsistencyProof{Old: savedSize, New: size, Hashes: hashes}).Marshal()
	return testExport{b: b, opts: bundle.Options{AttestationKey: pub, LogKey: vkey, Subject: testSubject, Salt: salt, Saved: saved}}
}

func (e testExport) archive(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := e.b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVerifyGenerated checks that the export the tests build is a real
// one: bundle.Verify accepts it, after a Write and a Read.
func TestVerifyGenerated(t *testing.T) {
	e := makeExport(t)
	b, err := bundle.Read(bytes.NewReader(e.archive(t)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bundle.Verify(b, e.opts)
	if err != nil {
		t.Fatalf("the generated export does not verify: %v", err)
	}
	if !rep.SubjectChecked || rep.Consistent == "" || len(rep.Entries) != 5 || rep.KeysFromExport || rep.Origin != testOrigin {
		t.Fatalf("report %+v", rep)
	}
}

// TestWriteRead checks that Read gives back what Write wrote, and that a
// Write of a Read gives the same bytes (the archive format has one
// encoding): for the export built here and for the committed example
// export of docs/examples, made by the service.
func TestWriteRead(t *testing.T) {
	e := makeExport(t)
	first := e.archive(t)
	b, err := bundle.Read(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if b.Forget != e.b.Forget || !bytes.Equal(b.Attestation, e.b.Attestation) || !bytes.Equal(b.AttestationPub, e.b.AttestationPub) ||
		!bytes.Equal(b.LogKey, e.b.LogKey) || !bytes.Equal(b.Checkpoint, e.b.Checkpoint) || !bytes.Equal(b.Consistency, e.b.Consistency) ||
		!b.Created.Equal(e.b.Created) {
		t.Fatalf("Read gave another bundle than the one written")
	}
	if !slices.EqualFunc(b.Entries, e.b.Entries, equalEntry) {
		t.Fatalf("Read gave entries %v, want %v", entryNames(b.Entries), entryNames(e.b.Entries))
	}
	var again bytes.Buffer
	if err := b.Write(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), first) {
		t.Fatalf("Write of a Read gave %d other bytes than the %d read", again.Len(), len(first))
	}
	// Without a consistency proof, and with the entries out of order.
	b.Consistency = nil
	slices.Reverse(b.Entries)
	var noCons bytes.Buffer
	if err := b.Write(&noCons); err != nil {
		t.Fatal(err)
	}
	b2, err := bundle.Read(bytes.NewReader(noCons.Bytes()))
	if err != nil || b2.Consistency != nil || !slices.EqualFunc(b2.Entries, e.b.Entries, equalEntry) {
		t.Fatalf("round trip without a consistency proof: %v", err)
	}

	example, err := os.ReadFile("../docs/examples/walkthrough.export.tar.gz")
	if err != nil {
		t.Fatalf("the committed example export: %v", err)
	}
	eb, err := bundle.Read(bytes.NewReader(example))
	if err != nil {
		t.Fatalf("the committed example export: %v", err)
	}
	var ex bytes.Buffer
	if err := eb.Write(&ex); err != nil {
		t.Fatal(err)
	}
	// Its README.txt is the template of the day it was made (Write makes
	// it anew, Read does not keep it): every other file is the same.
	eb2, err := bundle.Read(bytes.NewReader(ex.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if eb2.Forget != eb.Forget || !bytes.Equal(eb2.Attestation, eb.Attestation) || !bytes.Equal(eb2.Checkpoint, eb.Checkpoint) ||
		!bytes.Equal(eb2.Consistency, eb.Consistency) || !bytes.Equal(eb2.LogKey, eb.LogKey) || !bytes.Equal(eb2.AttestationPub, eb.AttestationPub) ||
		!eb2.Created.Equal(eb.Created) || !slices.EqualFunc(eb2.Entries, eb.Entries, equalEntry) {
		t.Fatalf("Write of a Read of the example export gave another export")
	}
	if bytes.Equal(eb.Readme(), readmeOf(t, example)) && !bytes.Equal(ex.Bytes(), example) {
		t.Fatalf("Write of a Read of the example export gave other bytes")
	}

	// Write refuses a bundle whose forget id would make another directory.
	for _, id := range []string{"", "../x", strings.Repeat("A", 32), testForget + "/x"} {
		bad := *e.b
		bad.Forget = id
		if err := bad.Write(new(bytes.Buffer)); !errors.Is(err, bundle.ErrFormat) {
			t.Errorf("Write with forget id %q: %v, want ErrFormat", id, err)
		}
	}
}

// readmeOf returns the README.txt of an export archive.
func readmeOf(t *testing.T, archive []byte) []byte {
	t.Helper()
	for _, m := range members(t, archive) {
		if strings.HasSuffix(m.hdr.Name, "/"+bundle.FileReadme) {
			return m.data
		}
	}
	t.Fatal("no README.txt")
	return nil
}

func equalEntry(a, b bundle.Entry) bool {
	return a.Index == b.Index && a.Event == b.Event && bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Proof, b.Proof)
}

func entryNames(es []bundle.Entry) []string {
	var names []string
	for _, e := range es {
		names = append(names, e.EntryName())
	}
	return names
}

// member is one tar header and its content, for building archives by hand.
type member struct {
	hdr  tar.Header
	data []byte
}

func file(name string, data []byte) member {
	return member{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data: data}
}

// members returns the files of a good export as members, in Write's order.
func members(t *testing.T, archive []byte) []member {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var ms []member
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		var buf bytes.Buffer
		buf.ReadFrom(tr)
		ms = append(ms, file(hdr.Name, buf.Bytes()))
	}
	return ms
}

// pack writes members as a gzip tar archive. A member whose data is
// shorter than its header's size is written truncated, as it is.
func pack(t *testing.T, ms []member) []byte {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, m := range ms {
		hdr := m.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatalf("header %q: %v", hdr.Name, err)
		}
		if int64(len(m.data)) < hdr.Size {
			// A header that claims more than follows: stop here, the rest
			// of the archive is cut.
			raw.Write(m.data)
			return gz(t, raw.Bytes())
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return gz(t, raw.Bytes())
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestReadRefuses checks that Read refuses every archive that is not
// exactly an export, with an error wrapping ErrFormat that says why.
func TestReadRefuses(t *testing.T) {
	e := makeExport(t)
	good := e.archive(t)
	base := members(t, good)
	dir := "shredd-export-" + testForget + "/"
	without := func(names ...string) []member {
		return slices.DeleteFunc(slices.Clone(base), func(m member) bool { return slices.Contains(names, strings.TrimPrefix(m.hdr.Name, dir)) })
	}
	with := func(extra ...member) []member { return append(slices.Clone(base), extra...) }
	var ack, ackBase string
	for _, en := range e.b.Entries {
		if en.Event == attest.EventHolderAck {
			ackBase = en.EntryName()
		}
	}
	ack = dir + ackBase
	var rawTar bytes.Buffer
	zr, _ := gzip.NewReader(bytes.NewReader(good))
	rawTar.ReadFrom(zr)

	for _, c := range []struct {
		name    string
		archive []byte
		want    string // in the error
	}{
		{"not gzip", []byte("shredd-export-" + testForget + "/attestation.json\n"), "gzip.header"},
		{"a tar without gzip", rawTar.Bytes(), "gzip.header"},
		{"gzip of something else", gz(t, []byte("just some text, not a tar archive at all, long enough for a header? no.")), "tar.truncated"},
		{"empty tar", pack(t, nil), "README.txt is missing"},
		{"truncated", good[:len(good)/2], ""},
		{"symlink", pack(t, with(member{hdr: tar.Header{Name: dir + "evil.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}})),
			"is not a regular file"},
		{"symlink in place of a file", pack(t, append(without("attestation.pub"),
			member{hdr: tar.Header{Name: dir + "attestation.pub", Typeflag: tar.TypeSymlink, Linkname: "../../home/regulator/.ssh/id_ed25519.pub"}})),
			"is not a regular file"},
		{"hard link", pack(t, with(member{hdr: tar.Header{Name: dir + "notes", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}})),
			"is not a regular file"},
		{"fifo", pack(t, with(member{hdr: tar.Header{Name: dir + "pipe", Typeflag: tar.TypeFifo}})), "is not a regular file"},
		{"a file outside, by ..", pack(t, with(file(dir+"../attestation.json", []byte("{}")))), "[tar.path]"},
		{"a file outside, absolute", pack(t, with(file("/etc/cron.d/shredd", []byte("* * * * * root sh\n")))), "[tar.path]"},
		{"a file at the top", pack(t, with(file("attestation.json", []byte("{}")))), "is not a file of one shredd-export-<forget id> directory"},
		{"a file in a subdirectory", pack(t, with(file(dir+"sub/attestation.json", []byte("{}")))), "is not a file of one shredd-export-<forget id> directory"},
		{"two top directories", pack(t, with(file("shredd-export-"+strings.Repeat("0", 32)+"/README.txt", []byte("hi")))),
			"is not a file of one shredd-export-<forget id> directory"},
		{"a top directory that is not an export's", pack(t, []member{file("shredd-export-XYZ/attestation.json", []byte("{}"))}),
			"is not a file of one shredd-export-<forget id> directory"},
		{"unknown file", pack(t, with(file(dir+"notes.txt", []byte("trust me")))), "unknown file notes.txt"},
		{"entry name with a leading zero", pack(t, with(file(dir+"entry-01-key_created.json", []byte("{}")))), "unknown file"},
		{"entry name with an unknown extension", pack(t, with(file(dir+ackBase+".sig", []byte("x")))), "unknown file"},
		{"duplicate file", pack(t, with(file(dir+"attestation.json", e.b.Attestation))), "[tar.duplicate]"},
		{"duplicate entry", pack(t, with(file(ack+".json", []byte("{}")))), "[tar.duplicate]"},
		{"oversized entry", pack(t, append(without(ackBase+".json"), file(ack+".json", bytes.Repeat([]byte("x"), bundle.MaxEntrySize+1)))),
			"is over 65535 bytes"},
		{"oversized file", pack(t, []member{{hdr: tar.Header{Name: dir + "attestation.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: bundle.MaxFileSize + 1}}}),
			"[bundle.size]"},
		{"a file shorter than its header says", pack(t, []member{{hdr: tar.Header{Name: dir + "attestation.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1000},
			data: []byte("{}")}}), "truncated"},
		{"missing attestation.json", pack(t, without("attestation.json")), "attestation.json is missing"},
		{"missing attestation.pub", pack(t, without("attestation.pub")), "attestation.pub is missing"},
		{"missing log.vkey", pack(t, without("log.vkey")), "log.vkey is missing"},
		{"missing checkpoint", pack(t, without("checkpoint")), "checkpoint is missing"},
		{"entry .json without .tlog-proof", pack(t, without(ackBase+".tlog-proof")), ackBase + " needs both its .json and its .tlog-proof"},
		{"entry .tlog-proof without .json", pack(t, without(ackBase+".json")), ackBase + " needs both its .json and its .tlog-proof"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := bundle.Read(bytes.NewReader(c.archive))
			if err == nil {
				t.Fatalf("Read accepted it: forget %s, %d entries", b.Forget, len(b.Entries))
			}
			if !errors.Is(err, bundle.ErrFormat) {
				t.Errorf("error %v does not wrap ErrFormat", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}

	// Directory members: only the export's own top directory. Any other
	// is refused, since tar xzf, as README.txt says, would create it.
	for _, name := range []string{"../outside/", "/etc/cron.d/", "shredd-export-" + strings.Repeat("0", 32) + "/"} {
		_, err := bundle.Read(bytes.NewReader(pack(t, with(member{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}))))
		if !errors.Is(err, bundle.ErrFormat) {
			t.Errorf("directory member %q: %v, want ErrFormat", name, err)
		}
	}
	ok := "shredd-export-" + e.b.Forget + "/"
	if _, err := bundle.Read(bytes.NewReader(pack(t, with(member{hdr: tar.Header{Name: ok, Typeflag: tar.TypeDir, Mode: 0o755}})))); err != nil {
		t.Errorf("the export's own directory member refused: %v", err)
	}
}

// Example shows a regulator's program reading an export and checking
// it with the keys it obtained from the operator.
func Example() {
	f, err := os.Open("../docs/examples/walkthrough.export.tar.gz")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	b, err := bundle.Read(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range b.Entries {
		fmt.Println(e.Event)
	}
	// Output:
	// key_created
	// forget_committed
	// epoch_completed
	// erasure_attested
}
