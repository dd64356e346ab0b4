package erasure

import (
	"context"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
)

// subjectSalt returns the salt of a new forget's subject commitment: the
// one derived from the subject's live key (st and gen, as keystore.Tree.State
// read them), so that the forget, its attestation and
// the key's key_created event carry the same commitment; a fresh random
// salt when the subject has no key or the key cannot be read now (a root
// store down must not stop a forget).
func (s *Eraser) subjectSalt(ctx context.Context, sid envelope.SID, st keystore.SubjectState, gen uint32) []byte {
	if st == keystore.SubjectLive {
		if k, err := s.keys.KeyAt(ctx, envelope.Ref{SID: sid, Gen: gen}); err == nil {
			return journal.CommitmentSalt(k.Key)
		}
	}
	return attest.NewSalt()
}
