package testkeys_test

import (
	"bytes"
	"encoding/hex"
	"io"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

// TestPinned pins values that the released envelope vectors depend on: they
// must never change. The expected values were computed independently from
// the documented definitions (SHA-256 of label, 0x00, uint64be(i); and of
// label, 0x00, uint32be(len(seed)), seed, uint64be(block)).
func TestPinned(t *testing.T) {
	sid := testkeys.SID(0)
	rnd := make([]byte, 40)
	if _, err := io.ReadFull(testkeys.Rand("pinned"), rnd); err != nil {
		t.Fatal(err)
	}
	art := testkeys.Artifact(0)
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"SID(0)", sid[:], "1424d5761dd9f6d32446511e943cb3cb922790736ff767225d25f5f9c4890871"},
		{"SubjectKey(0)", testkeys.SubjectKey(0), "2ff6127c26569409176943ed04a24e7ea859c60d3aafb295df43166c16557841"},
		{"Artifact(0)", art[:], "0ceb14744ccfb7c7564d05109b429565"},
		{"Rand(pinned)", rnd, "5f0cbf7f74a529aba9d110c37422d73280c11ba346fd7695ea2e7fd90dde2c3b3ae437a3f6db9ec8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hex.EncodeToString(tt.got); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDistinct(t *testing.T) {
	seen := make(map[string]string)
	note := func(what string, b []byte) {
		if prev, ok := seen[string(b)]; ok {
			t.Errorf("%s equals %s", what, prev)
		}
		seen[string(b)] = what
	}
	for i := range 100 {
		sid := testkeys.SID(i)
		note("SID", sid[:])
		note("SubjectKey", testkeys.SubjectKey(i))
		art := testkeys.Artifact(i)
		note("Artifact", art[:])
	}
}

func TestKeys(t *testing.T) {
	k := testkeys.Key(3)
	if k.Ref != testkeys.Ref(3) || k.Ref.Gen != 1 || k.Ref.SID != testkeys.SID(3) {
		t.Errorf("Key(3).Ref = %v", k.Ref)
	}
	if len(k.Key) != envelope.KeySize || !bytes.Equal(k.Key, testkeys.SubjectKey(3)) {
		t.Errorf("Key(3).Key = %x", k.Key)
	}
	k.Key[0] ^= 1
	if bytes.Equal(k.Key, testkeys.SubjectKey(3)) {
		t.Error("SubjectKey returns a shared slice")
	}
	keys, refs := testkeys.Keys(5), testkeys.Lineage(5)
	for i := range 5 {
		if keys[i].Ref != refs[i] || refs[i] != testkeys.Ref(i) {
			t.Errorf("Keys/Lineage index %d mismatch", i)
		}
	}
}

// TestRandChunking checks that the stream does not depend on read sizes.
func TestRandChunking(t *testing.T) {
	want := make([]byte, 1000)
	if _, err := io.ReadFull(testkeys.Rand("chunks"), want); err != nil {
		t.Fatal(err)
	}
	r := testkeys.Rand("chunks")
	var got []byte
	for n := 1; len(got) < len(want); n = n%37 + 1 {
		b := make([]byte, min(n, len(want)-len(got)))
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, want) {
		t.Error("chunked reads differ from one read")
	}
	other := make([]byte, 32)
	io.ReadFull(testkeys.Rand("chunks2"), other)
	if bytes.Equal(other, want[:32]) {
		t.Error("different seeds give the same stream")
	}
}
