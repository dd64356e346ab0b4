package client_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/envelope"
)

// SealMany registers through POST /v1/datakey and seals on the client: the
// envelopes open through the server like Encrypt's, derivatives inherit
// their parents' lineage, failed items say why, and a forget refuses both
// the old envelopes and new data keys.
func TestSealMany(t *testing.T) {
	s, c := serverWithKinds(t, "episodic", "summary")
	r := s.client(s.token(access.ScopeDecrypt)) // the checks' reads: c's writes answer for none
	ctx := t.Context()
	rec, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"dana@example.com"}, Kind: "episodic", Plaintext: []byte("parent")})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 1<<20)
	reqs := []client.EncryptRequest{
		{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("a"), Context: []byte("ctx-a")},
		{Subjects: []string{"bob@example.com"}, Kind: "notes", Plaintext: []byte("b")},
		{Subjects: []string{"carol@example.com"}, Parents: []string{rec.Artifact}, Kind: "summary", Plaintext: big},
		{Subjects: []string{"erin@example.com"}, Kind: "episodic"},
	}
	res, err := c.SealMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("SealMany: %+v", res)
	}
	if e := res[1].Err; e == nil || e.Status != 400 || e.Code != "unknown_kind" || !strings.Contains(e.Op, "item 1") || res[1].Envelope != nil {
		t.Fatalf("item 1: %+v", res[1])
	}
	if res[2].LineageSize != 2 {
		t.Fatalf("derivative lineage %d, want 2", res[2].LineageSize)
	}
	for _, i := range []int{0, 2, 3} {
		e, err := envelope.ParseText(res[i].Ciphertext())
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		if got := e.Header.Artifact; envelopeID(got) != res[i].Artifact {
			t.Fatalf("item %d: envelope of artifact %x, answered %s", i, got, res[i].Artifact)
		}
		out, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: res[i].Ciphertext(), Context: reqs[i].Context})
		if err != nil {
			t.Fatalf("decrypt item %d: %v", i, err)
		}
		if !bytes.Equal(out.Plaintext, reqs[i].Plaintext) || out.Artifact != res[i].Artifact {
			t.Fatalf("decrypt item %d: artifact %s, %d bytes", i, out.Artifact, len(out.Plaintext))
		}
	}
	raw, err := r.DecryptRaw(ctx, res[2].Envelope, nil, "")
	if err != nil || !bytes.Equal(raw.Plaintext, big) {
		t.Fatalf("DecryptRaw of a client-sealed envelope: %v", err)
	}
	// The context is bound on the client: without it, no plaintext.
	if _, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: res[0].Ciphertext()}); err == nil {
		t.Fatal("opened without its context")
	}

	// Forgetting the parent's subject erases the client-sealed derivative,
	// and the server hands out no data key for a forgotten subject.
	if _, err := c.Forget(ctx, "dana@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: res[2].Ciphertext()}); !client.IsShredded(err) {
		t.Fatalf("decrypt after the parent's forget: %v, want 410", err)
	}
	if _, err := c.Forget(ctx, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Seal(ctx, client.EncryptRequest{Parents: []string{res[0].Artifact}, Kind: "summary"}); !client.IsShredded(err) {
		t.Fatalf("Seal of a forgotten parent: %v, want 410", err)
	}
	one, err := c.Seal(ctx, client.EncryptRequest{Subjects: []string{"frank@example.com"}, Kind: "episodic", Plaintext: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: one.Ciphertext()}); err != nil || string(out.Plaintext) != "f" {
		t.Fatalf("Seal then Decrypt: %v", err)
	}

	// Scopes: a decrypt-only token gets no data key.
	dec := s.client(s.token("decrypt"))
	if _, err := dec.Seal(ctx, client.EncryptRequest{Subjects: []string{"x@example.com"}, Kind: "episodic"}); !client.IsForbidden(err) {
		t.Fatalf("Seal with a decrypt token: %v, want 403", err)
	}
	// Limits are checked before anything is registered.
	if _, err := c.SealMany(ctx, []client.EncryptRequest{{Subjects: []string{"x@example.com"}, Kind: "episodic", Context: make([]byte, envelope.MaxContext+1)}}); !errors.Is(err, envelope.ErrTooLarge) {
		t.Fatalf("SealMany with an oversized context: %v", err)
	}
}

func envelopeID(a envelope.ArtifactID) string {
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	for _, x := range a {
		b.WriteByte(hexdigits[x>>4])
		b.WriteByte(hexdigits[x&15])
	}
	return b.String()
}

// SealTo writes each envelope into the buffer it is given: sealed one
// after another into one buffer, each envelope opens to its own record,
// the buffer's storage is reused once it is large enough, and a refused
// item leaves nothing sealed.
func TestSealTo(t *testing.T) {
	s, c := serverWithKinds(t, "episodic")
	r := s.client(s.token(access.ScopeDecrypt)) // the checks' reads: c's writes answer for none
	ctx := t.Context()
	var buf []byte
	for i := range 4 {
		pt := bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i) // each a little larger
		res, err := c.SealTo(ctx, buf, client.EncryptRequest{Subjects: []string{"hana@example.com"}, Kind: "episodic", Plaintext: pt, Context: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && cap(buf) >= len(res.Envelope) && &res.Envelope[0] != &buf[:1][0] {
			t.Fatalf("record %d: sealed into new storage though the buffer (cap %d) held its %d bytes", i, cap(buf), len(res.Envelope))
		}
		out, err := r.DecryptRaw(ctx, res.Envelope, []byte{byte(i)}, "")
		if err != nil || !bytes.Equal(out.Plaintext, pt) || out.Artifact != res.Artifact {
			t.Fatalf("record %d: %v", i, err)
		}
		buf = res.Envelope
		if i == 0 {
			buf = slices.Grow(buf[:0], 1<<20) // room for the others
		}
	}
	before := slices.Clone(buf)
	if _, err := c.SealTo(ctx, buf, client.EncryptRequest{Subjects: []string{"hana@example.com"}, Kind: "no-such-kind", Plaintext: []byte("x")}); err == nil {
		t.Fatal("SealTo of an unknown kind: no error")
	}
	if !bytes.Equal(buf, before) {
		t.Fatal("a refused SealTo wrote into the buffer")
	}

	// SealManyTo: a buffer per item, reused from call to call; a refused
	// item leaves its buffer alone.
	bufs := [][]byte{make([]byte, 0, 1<<20), make([]byte, 0, 1<<20), make([]byte, 0, 1<<20)}
	first := []*byte{&bufs[0][:1][0], &bufs[1][:1][0], &bufs[2][:1][0]}
	for round := range 2 {
		reqs := []client.EncryptRequest{
			{Subjects: []string{"hana@example.com"}, Kind: "episodic", Plaintext: bytes.Repeat([]byte{'x'}, 200<<10+round)},
			{Subjects: []string{"hana@example.com"}, Kind: "no-such-kind", Plaintext: []byte("y")},
			{Subjects: []string{"ivan@example.com"}, Kind: "episodic", Plaintext: []byte("z"), Context: []byte("c")},
		}
		res, err := c.SealManyTo(ctx, bufs, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if res[1].Err == nil || res[1].Envelope != nil {
			t.Fatalf("round %d: the unknown kind: %+v", round, res[1])
		}
		for _, i := range []int{0, 2} {
			if &res[i].Envelope[0] != first[i] {
				t.Fatalf("round %d, item %d: not sealed into its buffer", round, i)
			}
			out, err := r.DecryptRaw(ctx, res[i].Envelope, reqs[i].Context, "")
			if err != nil || !bytes.Equal(out.Plaintext, reqs[i].Plaintext) {
				t.Fatalf("round %d, item %d: %v", round, i, err)
			}
			bufs[i] = res[i].Envelope
		}
	}
	if _, err := c.SealManyTo(ctx, bufs[:2], make([]client.EncryptRequest, 3)); !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("SealManyTo with 2 buffers for 3 items: %v, want ErrInvalid", err)
	}

	// A buffer that shares memory with a plaintext, a context or another
	// buffer is refused before anything is sealed (sealing would overwrite
	// what it reads, or another item's envelope); plaintexts may share.
	pt := make([]byte, 1000, 4096)
	hana := func(p, ctx []byte) client.EncryptRequest {
		return client.EncryptRequest{Subjects: []string{"hana@example.com"}, Kind: "episodic", Plaintext: p, Context: ctx}
	}
	for name, call := range map[string]func() error{
		"SealTo into its plaintext":   func() error { _, err := c.SealTo(ctx, pt[:0], hana(pt, nil)); return err },
		"SealTo before its plaintext": func() error { _, err := c.SealTo(ctx, pt[:0], hana(pt[500:], nil)); return err },
		"SealTo into its context":     func() error { _, err := c.SealTo(ctx, pt[:0], hana([]byte("x"), pt[:10])); return err },
		"SealManyTo, one buffer twice": func() error {
			_, err := c.SealManyTo(ctx, [][]byte{bufs[0], bufs[0]}, []client.EncryptRequest{hana(nil, nil), hana(nil, nil)})
			return err
		},
		"SealManyTo, overlapping halves": func() error {
			_, err := c.SealManyTo(ctx, [][]byte{pt[:0:2048], pt[2000:2000]}, []client.EncryptRequest{hana(nil, nil), hana(nil, nil)})
			return err
		},
		"SealManyTo into another's plaintext": func() error {
			_, err := c.SealManyTo(ctx, [][]byte{nil, pt[1000:1000]}, []client.EncryptRequest{hana(pt[1000:1100], nil), hana(nil, nil)})
			return err
		},
	} {
		if err := call(); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	shared := []client.EncryptRequest{hana(pt[:1000], nil), hana(pt[:1000], nil)}
	res, err := c.SealManyTo(ctx, [][]byte{nil, make([]byte, 0, 2048)}, shared)
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("SealManyTo of one plaintext twice: %v %+v", err, res)
	}
}
