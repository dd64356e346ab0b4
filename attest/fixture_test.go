package attest_test

// Fixed, test-only inputs: keys, salt and statements. Every key here is
// public, so nothing it signs means anything outside the tests.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"
)

// fixed returns SHA-256 of a test label: seeds, salts and ids that are the
// same on every machine.
func fixed(label string) []byte {
	d := sha256.Sum256([]byte("shredd/attest/testdata/" + label))
	return d[:]
}

func signingKey() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(fixed("signing-key")) }
func otherKey() ed25519.PrivateKey   { return ed25519.NewKeyFromSeed(fixed("other-key")) }
func holderKey() ed25519.PrivateKey  { return ed25519.NewKeyFromSeed(fixed("holder-key")) }

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

const (
	testSubject = "alice@example.com"
	testForget  = "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f"
)

func testSalt() []byte { return fixed("salt") }

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func okConditions() []attest.Condition {
	return []attest.Condition{
		{Name: attest.CondCascadeClosed, Status: attest.StatusOK, Evidence: "4 artifacts in the lineage closure: 2 sealed under the destroyed subject key, 2 plaintext-held and purged with a signed ack from holder ann-1"},
		{Name: attest.CondWorkersQuiesced, Status: attest.StatusOK, Evidence: "the last lease issued before the barrier expired at 2026-03-01T10:02:00Z; none is live"},
		{Name: attest.CondReadPathConverged, Status: attest.StatusOK, Evidence: "key cache TTL of 30s passed on every node; Vault reports root versions 3 and 4 gone; a decrypt of artifact 5d2e9c0a41b7f3e86c1a0b2d4f6e8a13 failed with 410"},
		{Name: attest.CondClosureIntact, Status: attest.StatusOK, Evidence: "every artifact has a registered kind (episodic, summary, embedding, kv-cache); no holder reported unregistered holdings"},
		{Name: attest.CondBackupsEpoch, Status: attest.StatusOK, Evidence: "root epoch 7 rotated the root key to version 5 and trimmed versions 3 and 4 at 2026-03-01T10:05:00Z"},
	}
}

// vaultStatement is the full example: a Vault Transit root, sealed and
// plaintext-held artifacts, one holder ack, the residuals.
func vaultStatement(t testing.TB) attest.Statement {
	t.Helper()
	acked := []string{"a7e4b2c9d1f0436e8b5a2c7d9e1f3b40", "c3d5e7f9a1b3405d8e6f1a2b3c4d5e6f"}
	ack, err := attest.SignAck(testForget, "ann-1", acked, holderKey())
	if err != nil {
		t.Fatal(err)
	}
	p := attest.Predicate{
		Forget: testForget,
		Claim:  attest.Claim,
		Timeline: attest.Timeline{
			Requested: at("2026-03-01T10:00:00Z"),
			Committed: at("2026-03-01T10:00:00.012Z"),
			Shredded:  at("2026-03-01T10:05:00Z"),
			Erased:    at("2026-03-01T10:06:30Z"),
		},
		KeyEvidence: attest.KeyEvidence{
			RootStore:           attest.RootStoreVaultTransit,
			RetiredRootVersions: []int{3, 4},
			RootKeyConfig: &attest.RootKeyConfig{Name: "shredd-root", Type: "aes256-gcm96",
				MinAvailableVersion: 5, LatestVersion: 5},
			Epoch: 7,
		},
		Artifacts: []attest.Artifact{
			{ID: "5d2e9c0a41b7f3e86c1a0b2d4f6e8a13", Kind: "episodic", Holder: "memory-svc", ClosedBy: attest.ClosedSealedKeyDestroyed},
			{ID: "9b1c3e5f7a2d4046b8c0e2f4a6b8d0e2", Kind: "summary", Holder: "memory-svc", ClosedBy: attest.ClosedSealedKeyDestroyed},
			{ID: acked[0], Kind: "embedding", Holder: "ann-1", ClosedBy: attest.ClosedHolderAck, AckSignature: ack.Signature},
			{ID: acked[1], Kind: "kv-cache", Holder: "ann-1", ClosedBy: attest.ClosedHolderAck, AckSignature: ack.Signature},
		},
		Conditions: okConditions(),
		HolderAcks: []attest.HolderAck{ack},
		Residuals: []attest.Residual{
			{Kind: attest.ResidualRootStoreSnapshots, Description: "Vault snapshots taken before 2026-03-01T10:05:00Z still hold root versions 3 and 4; configured snapshot retention is 7 days, so the horizon is 2026-03-08T10:05:00Z"},
			{Kind: attest.ResidualCollateralAggregates, Description: "summary 9b1c3e5f7a2d4046b8c0e2f4a6b8d0e2 also covered 2 other subjects and is unreadable for them too; its holder must rebuild it"},
			{Kind: attest.ResidualHolderTrust, Description: "ann-1 signed that it purged its plaintext copies with its registered key; shredd cannot observe its storage"},
		},
	}
	return attest.NewStatement(attest.Commit(testSubject, testSalt()), p)
}

// localStatement is the smallest: the embedded local root, one sealed
// artifact, no holder acks.
func localStatement(t testing.TB) attest.Statement {
	t.Helper()
	conds := okConditions()
	conds[0].Evidence = "1 artifact in the lineage closure, sealed under the destroyed subject key"
	conds[2].Evidence = "key cache TTL of 30s passed; the local root file no longer holds version 1; a decrypt failed with 410"
	conds[4].Evidence = "root epoch 2 rotated the local root to version 2 and destroyed version 1"
	p := attest.Predicate{
		Forget: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
		Claim:  attest.Claim,
		Timeline: attest.Timeline{
			Requested: at("2026-03-02T08:00:00Z"),
			Committed: at("2026-03-02T08:00:00Z"),
			Shredded:  at("2026-03-02T09:00:00Z"),
			Erased:    at("2026-03-02T09:00:01Z"),
		},
		KeyEvidence: attest.KeyEvidence{RootStore: attest.RootStoreLocal, RetiredRootVersions: []int{1}, Epoch: 2},
		Artifacts: []attest.Artifact{
			{ID: "1a2b3c4d5e6f708192a3b4c5d6e7f809", Kind: "episodic", ClosedBy: attest.ClosedSealedKeyDestroyed},
		},
		Conditions: conds,
		Residuals: []attest.Residual{
			{Kind: attest.ResidualRootStoreSnapshots, Description: "filesystem backups of the data directory taken before 2026-03-02T09:00:00Z hold root version 1"},
		},
	}
	return attest.NewStatement(attest.Commit("bob", testSalt()), p)
}

// signUnchecked signs a statement without Sign's validation, the way a
// buggy or hostile signer could: for testing that Open refuses it.
func signUnchecked(t testing.TB, st attest.Statement, key ed25519.PrivateKey) []byte {
	t.Helper()
	payload, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return signPayload(t, payload, key)
}

func signPayload(t testing.TB, payload []byte, key ed25519.PrivateKey) []byte {
	t.Helper()
	env := attest.Envelope{PayloadType: attest.PayloadType, Payload: payload,
		Signatures: []attest.Signature{{KeyID: attest.KeyID(pubOf(key)), Sig: ed25519.Sign(key, attest.PAE(attest.PayloadType, payload))}}}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signed(t testing.TB, st attest.Statement) []byte {
	t.Helper()
	env, err := attest.Sign(st, signingKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
