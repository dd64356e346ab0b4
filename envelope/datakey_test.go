package envelope_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

func dataKeyFixture(t *testing.T, idx ...int) (envelope.Header, []envelope.SubjectKey) {
	t.Helper()
	refs := make([]envelope.Ref, len(idx))
	keys := make([]envelope.SubjectKey, len(idx))
	for i, j := range idx {
		refs[i] = envelope.Ref{SID: testkeys.SID(j), Gen: 1}
		keys[i] = envelope.SubjectKey{Ref: refs[i], Key: testkeys.SubjectKey(j)}
	}
	h, err := envelope.NewHeader(nil, envelope.ArtifactID{1}, "episodic", refs)
	if err != nil {
		t.Fatal(err)
	}
	return h, keys
}

// A writer sealing with a data key produces the envelope Seal gives with the
// same header, and Open opens it with the subject keys.
func TestSealWithKey(t *testing.T) {
	h, keys := dataKeyFixture(t, 1, 2, 3)
	dk, err := envelope.NewDataKey(h, keys)
	if err != nil {
		t.Fatal(err)
	}
	pt, ctx := []byte("written by the client"), []byte("tenant=a")
	got, err := envelope.SealWithKey([]byte("prefix"), dk, pt, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatal("SealWithKey did not append to dst")
	}
	got = got[len("prefix"):]
	want, err := envelope.Seal(h, keys, pt, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Marshal()) {
		t.Fatal("client-sealed envelope differs from Seal's")
	}
	e, err := envelope.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := envelope.Open(e, keys, ctx); err != nil || !bytes.Equal(out, pt) {
		t.Fatalf("Open: %q, %v", out, err)
	}
	if _, err := envelope.Open(e, keys, nil); !errors.Is(err, envelope.ErrOpen) {
		t.Fatalf("Open without the context: %v, want ErrOpen", err)
	}
	dk.Clear()
	if !bytes.Equal(dk.Key, make([]byte, envelope.KeySize)) {
		t.Fatal("Clear left key bytes")
	}
}

// A data key is bound to its header: with another header's bytes, or
// another header's key, the envelope does not open.
func TestSealWithKeyBound(t *testing.T) {
	h1, keys := dataKeyFixture(t, 4)
	h2, _ := dataKeyFixture(t, 4) // same lineage, fresh salt and nonce
	dk1, err := envelope.NewDataKey(h1, keys)
	if err != nil {
		t.Fatal(err)
	}
	dk2, err := envelope.NewDataKey(h2, keys)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(dk1.Key, dk2.Key) {
		t.Fatal("two headers of one lineage gave one key")
	}
	b, err := envelope.SealWithKey(nil, envelope.DataKey{Header: dk2.Header, Key: dk1.Key}, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := envelope.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.Open(e, keys, nil); !errors.Is(err, envelope.ErrOpen) {
		t.Fatalf("Open of a header sealed with another header's key: %v, want ErrOpen", err)
	}
}

func TestSealWithKeyErrors(t *testing.T) {
	h, keys := dataKeyFixture(t, 5, 6)
	dk, err := envelope.NewDataKey(h, keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.NewDataKey(h, keys[:1]); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("NewDataKey with a key missing: %v, want ErrInvalid", err)
	}
	if _, err := envelope.NewDataKey(envelope.Header{Kind: h.Kind, Lineage: h.Lineage}, keys); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("NewDataKey of a zero-salt header: %v, want ErrInvalid", err)
	}
	cases := []struct {
		name    string
		dk      envelope.DataKey
		pt, ctx []byte
		want    error
	}{
		{"short key", envelope.DataKey{Header: dk.Header, Key: dk.Key[:16]}, nil, nil, envelope.ErrInvalid},
		{"truncated header", envelope.DataKey{Header: dk.Header[:len(dk.Header)-1], Key: dk.Key}, nil, nil, envelope.ErrMalformed},
		{"bytes after the header", envelope.DataKey{Header: append(bytes.Clone(dk.Header), 0), Key: dk.Key}, nil, nil, envelope.ErrMalformed},
		{"version 2", envelope.DataKey{Header: append([]byte("SHRD\x02"), dk.Header[5:]...), Key: dk.Key}, nil, nil, envelope.ErrUnsupported},
		{"context too large", dk, nil, make([]byte, envelope.MaxContext+1), envelope.ErrTooLarge},
		{"plaintext too large", dk, make([]byte, envelope.MaxPlaintext+1), nil, envelope.ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := envelope.SealWithKey(nil, c.dk, c.pt, c.ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := envelope.ParseHeader(dk.Header); err != nil {
		t.Errorf("ParseHeader: %v", err)
	}
}
