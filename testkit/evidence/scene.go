// Package evidence generates the shared corpus of evidence cases
// (testdata/evidence): valid and tampered regulator exports, each with the
// keys, subject, salt and saved checkpoint it is checked with, the verdict
// every reader must give and the reason code of the spec
// (docs/transparency.md, "Reading an export strictly").
//
// Everything is deterministic: keys come from package testkeys, times
// are fixed, and the archives are compressed with stored deflate blocks
// (except the cases that test real compression), so the generator gives
// the same bytes on every run. The corpus is append-only: a published
// case never changes; new cases are added at the end.
package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/translog"
)

const (
	forgetID = "3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c"
	subject  = "alice@example.com"
	heldID   = "a7e4b2c9d1f0436e8b5a2c7d9e1f3b40"
	sealedID = "5d2e9c0a41b7f3e86c1a0b2d4f6e8a13"
	holderID = "ann-1"
)

var created = time.Date(2026, 3, 1, 10, 6, 30, 0, time.UTC)

func fixed(label string) []byte {
	d := sha256.Sum256([]byte("shredd/evidence/" + label))
	return d[:]
}

// scene is everything an export is made of; a case changes a field, or
// a hook, before build.
type scene struct {
	key     ed25519.PrivateKey // signs the attestation and the events
	holder  ed25519.PrivateKey
	signer  note.Signer // the log key
	subject string      // the subject the forget was for
	salt    []byte
	forget  string // the forget id in the statement and the events
	dir     string // the export's top directory
	epoch   int64
	// timeline, as JSON text (so that years before 100 and other zones
	// can be written)
	times [4]string

	// hooks on the bytes
	pred        func(*attest.Predicate) // the predicate, before it is encoded
	payload     func([]byte) []byte     // the statement, before it is signed
	attestation func([]byte) []byte     // attestation.json, after signing
	events      func([]evspec) []evspec
	eventBytes  func(i int, payload []byte) []byte // an event's payload before signing
	entryBytes  func(i int, entry []byte) []byte   // an entry after signing
	cpText      func(string) string                // the checkpoint text before signing
	cpSigned    func([]byte) []byte                // the signed checkpoint
	proofs      func(idx int64, proof []byte) []byte
	consistency func([]byte) []byte
	savedHook   func([]byte) []byte // the saved checkpoint, signed
	savedAt     int64               // tree size of the saved checkpoint (0: the size after alice's key)
	noSaved     bool
}

// evspec is one event of the log, before signing.
type evspec struct {
	ev   attest.Event
	key  ed25519.PrivateKey // nil: the scene's key
	skip bool               // in the log, not in the export
}

func newScene() *scene {
	skey, _ := testkeys.LogKey()
	signer, err := note.NewSigner(skey)
	if err != nil {
		panic(err)
	}
	return &scene{
		key:     testkeys.AttestationKey(0),
		holder:  testkeys.AttestationKey(1),
		signer:  signer,
		subject: subject,
		salt:    fixed("salt"),
		forget:  forgetID,
		dir:     "shredd-export-" + forgetID,
		epoch:   1,
		times: [4]string{created.Add(-30 * time.Minute).Format(time.RFC3339), created.Add(-30 * time.Minute).Format(time.RFC3339),
			created.Add(-10 * time.Minute).Format(time.RFC3339), created.Format(time.RFC3339)},
	}
}

// built is a built scene: the files of the export and the verifier's inputs.
type built struct {
	files      []file // in Write's order
	saved      []byte
	commitment string
}

type file struct {
	name string
	data []byte
}

func signEnvelope(payloadType string, payload []byte, key ed25519.PrivateKey) []byte {
	pub := key.Public().(ed25519.PublicKey)
	env := attest.Envelope{PayloadType: payloadType, Payload: payload,
		Signatures: []attest.Signature{{KeyID: attest.KeyID(pub), Sig: ed25519.Sign(key, attest.PAE(payloadType, payload))}}}
	b, err := json.Marshal(&env)
	if err != nil {
		panic(err)
	}
	return b
}

func (s *scene) statement() []byte {
	commitment := attest.Commit(s.subject, s.salt)
	ack, err := attest.SignAck(s.forget, holderID, []string{heldID}, s.holder)
	if err != nil {
		panic(err)
	}
	var conds []attest.Condition
	for _, name := range attest.Conditions() {
		conds = append(conds, attest.Condition{Name: name, Status: attest.StatusOK, Evidence: "proven by the evidence corpus"})
	}
	p := attest.Predicate{
		Forget:      s.forget,
		Claim:       attest.Claim,
		KeyEvidence: attest.KeyEvidence{RootStore: attest.RootStoreLocal, RetiredRootVersions: []int{1}, Epoch: s.epoch},
		Artifacts: []attest.Artifact{
			{ID: sealedID, Kind: "episodic", ClosedBy: attest.ClosedSealedKeyDestroyed},
			{ID: heldID, Kind: "embedding", Holder: holderID, ClosedBy: attest.ClosedHolderAck, AckSignature: ack.Signature},
		},
		Conditions: conds,
		HolderAcks: []attest.HolderAck{ack},
		Residuals: []attest.Residual{
			{Kind: attest.ResidualRootStoreSnapshots, Description: "backups of the data directory from before the epoch hold root version 1"},
			{Kind: attest.ResidualHolderTrust, Description: "ann-1 signed that it purged its plaintext copy; shredd cannot observe its storage"},
		},
	}
	if s.pred != nil {
		s.pred(&p)
	}
	st := attest.NewStatement(commitment, p)
	b, err := st.Marshal()
	if err != nil {
		panic(err)
	}
	// The timeline is written as text, so that any spelling can be signed.
	zero := `"timeline":{"requested":"0001-01-01T00:00:00Z","committed":"0001-01-01T00:00:00Z","shredded":"0001-01-01T00:00:00Z","erased":"0001-01-01T00:00:00Z"}`
	tl := fmt.Sprintf(`"timeline":{"requested":%q,"committed":%q,"shredded":%q,"erased":%q}`, s.times[0], s.times[1], s.times[2], s.times[3])
	if !bytes.Contains(b, []byte(zero)) {
		panic("evidence: the statement's timeline moved")
	}
	return bytes.Replace(b, []byte(zero), []byte(tl), 1)
}

func (s *scene) build() *built {
	out := &built{}
	payload := s.statement()
	if s.payload != nil {
		payload = s.payload(payload)
	}
	att := signEnvelope(attest.PayloadType, payload, s.key)
	if s.attestation != nil {
		att = s.attestation(att)
	}
	commitment := attest.Commit(s.subject, s.salt)
	out.commitment = commitment
	ack, _ := attest.SignAck(s.forget, holderID, []string{heldID}, s.holder)
	at := created.Add(-time.Hour)
	evs := []evspec{
		{ev: attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: attest.Commit("bob@example.com", fixed("bob")), Generation: 1}}, skip: true},
		{ev: attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: commitment, Generation: 1}}},
		{ev: attest.Event{Event: attest.EventForgetCommitted, Forget: &attest.ForgetEvent{Forget: s.forget, Subject: commitment, Generation: 1, Barrier: 7, KeyCreated: 1}}},
		{ev: attest.Event{Event: attest.EventHolderAck, Ack: ptr(attest.NewAckEvent(s.forget, ack))}},
		{ev: attest.Event{Event: attest.EventEpochCompleted, Epoch: &attest.EpochEvent{Epoch: s.epoch, RootStore: attest.RootStoreLocal, FromVersion: 1, ToVersion: 2, Retired: []int{1}}}},
		{ev: attest.Event{Event: attest.EventErasureAttested, Attested: &attest.AttestedEvent{Forget: s.forget, Subject: commitment, AttestationSHA256: attest.Digest(att)}}},
		{ev: attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: attest.Commit("carol@example.com", fixed("carol")), Generation: 1}}, skip: true},
	}
	if s.events != nil {
		evs = s.events(evs)
	}
	// The log: another subject's key, alice's key (the saved checkpoint),
	// her forget, the ack, the epoch, the attestation, one more key.
	var entries [][]byte
	for i, e := range evs {
		e.ev.Type, e.ev.Time = attest.EventType, at.Add(time.Duration(i)*time.Minute)
		p, err := json.Marshal(&e.ev)
		if err != nil {
			panic(err)
		}
		if s.eventBytes != nil {
			p = s.eventBytes(i, p)
		}
		k := e.key
		if k == nil {
			k = s.key
		}
		entry := signEnvelope(attest.EventPayloadType, p, k)
		if s.entryBytes != nil {
			entry = s.entryBytes(i, entry)
		}
		entries = append(entries, entry)
	}
	t := newTree(entries)
	n := int64(len(entries))
	cp := s.checkpoint(t, n)
	savedAt := s.savedAt
	if savedAt == 0 {
		savedAt = 2
	}
	if !s.noSaved {
		out.saved = s.checkpoint(t, savedAt)
		if s.savedHook != nil {
			out.saved = s.savedHook(out.saved)
		}
	}

	readmeB := &bundle.Bundle{Forget: s.forget, Created: created}
	out.files = []file{
		{bundle.FileReadme, readmeB.Readme()},
		{bundle.FileAttestation, att},
		{bundle.FileAttestationPub, mustPEM(s.key.Public().(ed25519.PublicKey))},
		{bundle.FileLogKey, []byte(vkeyOf(s.signer) + "\n")},
		{bundle.FileCheckpoint, cp},
		{bundle.FileCheckInclusion, bundle.CheckInclusionScript()},
	}
	for i, e := range evs {
		idx := int64(i)
		if e.skip {
			continue // another subject's event
		}
		proof, err := tlog.ProveRecord(n, idx, t)
		if err != nil {
			panic(err)
		}
		pb := (&translog.Proof{Index: idx, Hashes: proof, Checkpoint: cp}).Marshal()
		if s.proofs != nil {
			pb = s.proofs(idx, pb)
		}
		name := fmt.Sprintf("entry-%d-%s", idx, e.ev.Event)
		out.files = append(out.files, file{name + ".json", entries[i]}, file{name + ".tlog-proof", pb})
	}
	if savedAt < n {
		tp, err := tlog.ProveTree(n, savedAt, t)
		if err != nil {
			panic(err)
		}
		cb := (&translog.ConsistencyProof{Old: savedAt, New: n, Hashes: tp}).Marshal()
		if s.consistency != nil {
			cb = s.consistency(cb)
		}
		out.files = append(out.files, file{bundle.FileConsistency, cb})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func (s *scene) checkpoint(t tree, n int64) []byte {
	h, err := tlog.TreeHash(n, t)
	if err != nil {
		panic(err)
	}
	text := translog.Checkpoint{Origin: s.signer.Name(), Size: n, Hash: h}.String()
	if s.cpText != nil {
		text = s.cpText(text)
	}
	signed, err := note.Sign(&note.Note{Text: text}, s.signer)
	if err != nil {
		panic(err)
	}
	if s.cpSigned != nil {
		signed = s.cpSigned(signed)
	}
	return signed
}

// tree is an in-memory RFC 6962 tree (tlog's stored hashes).
type tree []tlog.Hash

func newTree(entries [][]byte) tree {
	var t tree
	for i, e := range entries {
		hs, err := tlog.StoredHashes(int64(i), e, t)
		if err != nil {
			panic(err)
		}
		t = append(t, hs...)
	}
	return t
}

func (t tree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = t[x]
	}
	return out, nil
}

func mustPEM(pub ed25519.PublicKey) []byte {
	b, err := attest.MarshalPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return b
}

// vkeyOf returns the verifier key of a note signer made by note.NewSigner
// from a key of testkeys or otherKey.
func vkeyOf(s note.Signer) string {
	for _, k := range logKeys {
		if k.signer.Name() == s.Name() && k.signer.KeyHash() == s.KeyHash() {
			return k.vkey
		}
	}
	panic("evidence: unknown log signer")
}

type logKey struct {
	signer note.Signer
	vkey   string
}

var logKeys []logKey

// newLogKey returns a signer (registered for vkeyOf) from a fixed seed.
func newLogKey(seed, origin string) (note.Signer, string) {
	skey, vkey, err := note.GenerateKey(testkeys.Rand(seed), origin)
	if err != nil {
		panic(err)
	}
	sg, err := note.NewSigner(skey)
	if err != nil {
		panic(err)
	}
	logKeys = append(logKeys, logKey{sg, vkey})
	return sg, vkey
}

func init() {
	skey, vkey := testkeys.LogKey()
	sg, err := note.NewSigner(skey)
	if err != nil {
		panic(err)
	}
	logKeys = append(logKeys, logKey{sg, vkey})
}

// ---- archives ----

// member is one tar member as written: a ustar header and the data.
type member struct {
	hdr  []byte // 512 bytes
	data []byte
}

// header returns a ustar header for a regular file (or typ), checksum set.
func header(name string, size int64, typ byte) []byte {
	h := make([]byte, 512)
	prefix := ""
	if len(name) > 100 {
		i := strings.LastIndex(name[:len(name)-1], "/")
		prefix, name = name[:i], name[i+1:]
	}
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[136:148], fmt.Sprintf("%011o\x00", created.Unix()))
	h[156] = typ
	copy(h[257:263], "ustar\x00")
	copy(h[263:265], "00")
	copy(h[329:345], "0000000\x000000000\x00")
	copy(h[345:500], prefix)
	setSum(h)
	return h
}

func setSum(h []byte) {
	copy(h[148:156], "        ")
	var s int64
	for _, c := range h {
		s += int64(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", s))
}

// setSignedSum sets the checksum as old tars did: the bytes summed as
// signed chars.
func setSignedSum(h []byte) {
	copy(h[148:156], "        ")
	var s int64
	for _, c := range h {
		s += int64(int8(c))
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", s))
}

func regular(name string, data []byte) member {
	return member{hdr: header(name, int64(len(data)), '0'), data: data}
}

func (b *built) members(dir string) []member {
	var ms []member
	for _, f := range b.files {
		ms = append(ms, regular(dir+"/"+f.name, f.data))
	}
	return ms
}

// tarOf writes members and the two end blocks.
func tarOf(ms []member) []byte {
	var out bytes.Buffer
	for _, m := range ms {
		out.Write(m.hdr)
		out.Write(m.data)
		if r := len(m.data) % 512; r != 0 {
			out.Write(make([]byte, 512-r))
		}
	}
	out.Write(make([]byte, 1024))
	return out.Bytes()
}

// gzipStored is a gzip member of data in stored deflate blocks: the same
// bytes with every Go version.
func gzipStored(data []byte, mtime uint32) []byte {
	var out bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, 0})
	binary.Write(&out, binary.LittleEndian, mtime)
	out.Write([]byte{0, 0xff})
	out.Write(deflateStored(data))
	binary.Write(&out, binary.LittleEndian, crc32.ChecksumIEEE(data))
	binary.Write(&out, binary.LittleEndian, uint32(len(data)))
	return out.Bytes()
}

func deflateStored(data []byte) []byte {
	var out bytes.Buffer
	for {
		n := min(len(data), 65535)
		final := byte(0)
		if n == len(data) {
			final = 1
		}
		out.WriteByte(final)
		binary.Write(&out, binary.LittleEndian, uint16(n))
		binary.Write(&out, binary.LittleEndian, ^uint16(n))
		out.Write(data[:n])
		data = data[n:]
		if final == 1 {
			return out.Bytes()
		}
	}
}
