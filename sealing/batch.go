package sealing

import (
	"context"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/registry"
)

// The batch paths: many registrations in one call. They do what the single
// calls do, item by item, with the per-call costs paid once: the parents'
// lineages read in a few queries, the barrier read locks taken once for
// every subject of the batch, and the registrations queued together, so
// that they share group commits without one goroutine each.

// maxBatch bounds the items of one batch call.
const maxBatch = 1000

// EncryptMany seals and registers many artifacts: Encrypt for each item,
// with one result or error per item, in order. An item's error does not
// affect the others; an item is answered only once its registration
// committed.
func (s *Sealer) EncryptMany(ctx context.Context, in []shredd.SealInput) ([]shredd.Sealed, []error) {
	out := make([]shredd.Sealed, len(in))
	srcs := make([]shredd.Source, len(in))
	pre := make([]error, len(in))
	for i, it := range in {
		srcs[i] = it.Source
		pre[i] = checkSealable(it.Plaintext, it.Context)
	}
	// withLineageMany prepares the items one after the other: each is
	// sealed into one buffer and kept in its text form.
	var buf []byte
	errs := s.withLineageMany(ctx, srcs, pre, func(i int, id shredd.ID, p *plan, keys []envelope.SubjectKey, refs []envelope.Ref) (func(), error) {
		h, err := envelope.NewHeader(s.opts.Rand, envelope.ArtifactID(id), p.kind, refs)
		if err != nil {
			return nil, fmt.Errorf("sealing: encrypt: %w: %w", shredd.ErrInvalid, err)
		}
		b, err := envelope.AppendSeal(buf[:0], h, keys, in[i].Plaintext, in[i].Context)
		if err != nil {
			return nil, fmt.Errorf("sealing: encrypt: %w", err)
		}
		buf = b
		text := envelope.Text(b)
		return func() {
			out[i] = shredd.Sealed{Artifact: id, Ciphertext: text, Lineage: len(refs), Inherited: p.inherited()}
		}, nil
	})
	return out, errs
}

// DataKeys registers many sealed artifacts and returns their data keys:
// DataKey for each source, with one result or error per item, in order.
// A key is returned only once its registration committed.
func (s *Sealer) DataKeys(ctx context.Context, srcs []shredd.Source) ([]shredd.DataKey, []error) {
	out := make([]shredd.DataKey, len(srcs))
	dks := make([]envelope.DataKey, len(srcs))
	errs := s.withLineageMany(ctx, srcs, nil, func(i int, id shredd.ID, p *plan, keys []envelope.SubjectKey, refs []envelope.Ref) (func(), error) {
		h, err := envelope.NewHeader(s.opts.Rand, envelope.ArtifactID(id), p.kind, refs)
		if err != nil {
			return nil, fmt.Errorf("sealing: data key: %w: %w", shredd.ErrInvalid, err)
		}
		if dks[i], err = envelope.NewDataKey(h, keys); err != nil {
			return nil, fmt.Errorf("sealing: data key: %w", err)
		}
		return func() {
			out[i] = shredd.DataKey{Artifact: id, Header: dks[i].Header, Key: dks[i].Key, Lineage: len(refs), Inherited: p.inherited()}
		}, nil
	})
	for i, err := range errs {
		if err != nil {
			dks[i].Clear() // derived, but its registration failed: never answered
		}
	}
	return out, errs
}

// withLineageMany is withLineage for a batch. pre holds errors known
// before (nil: none); those items are skipped. For each other item it
// resolves the lineage, fetches the keys and a new id, and runs prepare
// under the barrier read locks of every subject of the batch; the items
// prepare accepted are registered together, and the commit function it
// returned runs once an item's registration committed. It returns each
// item's error.
func (s *Sealer) withLineageMany(ctx context.Context, srcs []shredd.Source, pre []error,
	prepare func(i int, id shredd.ID, p *plan, keys []envelope.SubjectKey, refs []envelope.Ref) (func(), error)) []error {
	errs := make([]error, len(srcs))
	if pre != nil {
		copy(errs, pre)
	}
	if len(srcs) > maxBatch {
		for i := range errs {
			errs[i] = fmt.Errorf("sealing: batch of %d items, at most %d: %w", len(srcs), maxBatch, shredd.ErrTooLarge)
		}
		return errs
	}
	// Leases name their artifacts: resolve them first, then read every
	// parent's lineage at once.
	srcs = slices.Clone(srcs)
	var parents []shredd.ID
	for i := range srcs {
		if errs[i] == nil && len(srcs[i].Leases) > 0 {
			errs[i] = s.leaseParents(ctx, &srcs[i])
		}
		if errs[i] == nil {
			parents = append(parents, srcs[i].Parents...)
		}
	}
	slices.SortFunc(parents, func(a, b shredd.ID) int { return slices.Compare(a[:], b[:]) })
	parents = slices.Compact(parents)
	known, err := s.reg.ParentsOf(ctx, parents)
	if err != nil {
		known = nil // each item reads its own, and fails alone
	}
	plans := make([]*plan, len(srcs))
	cache := readCache{}
	var sids []envelope.SID
	for i, src := range srcs {
		if errs[i] != nil {
			continue
		}
		if plans[i], errs[i] = s.resolve(ctx, src, known, cache); errs[i] == nil {
			sids = append(sids, plans[i].sids...)
		}
	}
	unlock := s.reg.RLockSubjects(sids)
	defer unlock()
	reqs := make([]registry.Registration, 0, len(srcs))
	idx := make([]int, 0, len(srcs))
	commits := make([]func(), len(srcs))
	now := s.opts.Now()
	for i, p := range plans {
		if errs[i] != nil {
			continue
		}
		keys, refs, id, err := s.keysAndID(ctx, p)
		if err != nil {
			errs[i] = err
			continue
		}
		if commits[i], errs[i] = prepare(i, id, p, keys, refs); errs[i] != nil {
			continue
		}
		reqs = append(reqs, registration(id, p, refs, true, now))
		idx = append(idx, i)
	}
	pending := s.queueAll(ctx, reqs, idx, errs, "record")
	for j := range pending {
		i := idx[j]
		if errs[i] = pending[j].Wait(); errs[i] == nil {
			commits[i]()
		}
	}
	return errs
}

// leaseParents adds the artifacts of src's leases to its parents, and
// clears its leases.
// queueAll queues every registration of reqs, reqs[j] being item idx[j]
// of a batch whose errors are errs, and returns them pending: the caller
// waits for each, because once queued a registration is written or refused
// by the writer, and the barrier locks must cover it until then, whatever
// ctx does. When the queue refuses one, that item and every later one get
// the error, named for op.
func (s *Sealer) queueAll(ctx context.Context, reqs []registry.Registration, idx []int, errs []error, op string) []registry.Pending {
	pending := make([]registry.Pending, 0, len(reqs))
	for j := range reqs {
		p, err := s.reg.Queue(ctx, reqs[j])
		if err != nil {
			for _, i := range idx[j:] {
				errs[i] = fmt.Errorf("sealing: %s: %w", op, err)
			}
			break
		}
		pending = append(pending, p)
	}
	return pending
}

func (s *Sealer) leaseParents(ctx context.Context, src *shredd.Source) error {
	if len(src.Leases) > registry.MaxParents {
		return fmt.Errorf("sealing: %d leases, at most %d: %w", len(src.Leases), registry.MaxParents, shredd.ErrTooLarge)
	}
	parents := slices.Clone(src.Parents)
	for _, lid := range src.Leases {
		l, err := s.reg.GetLease(ctx, lid)
		if err != nil {
			return leaseErr(lid, err)
		}
		parents = append(parents, l.Artifact)
	}
	src.Parents, src.Leases = parents, nil
	return nil
}
