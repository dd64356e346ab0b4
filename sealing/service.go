package sealing

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/registry"
)

// Options configures a Sealer. Zero values take the defaults.
type Options struct {
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Rand is the randomness source for artifact ids and envelope nonces
	// (crypto/rand by default).
	Rand io.Reader
}

// Sealer seals and opens data under the keys of its lineage: it resolves
// each source's lineage, fetches the subject keys from the key tree, and
// records artifacts and leases in the registry under its barrier locks.
type Sealer struct {
	reg    *registry.Registry
	keys   *keystore.Tree
	hasher *registry.Hasher
	opts   Options
}

var _ shredd.Sealer = (*Sealer)(nil)

// New returns the sealer over the registry reg, the key tree keys and the
// subject hasher.
func New(reg *registry.Registry, keys *keystore.Tree, hasher *registry.Hasher, opts Options) *Sealer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	return &Sealer{reg: reg, keys: keys, hasher: hasher, opts: opts}
}

func (s *Sealer) newID() (shredd.ID, error) { return shredd.NewID(s.opts.Now(), s.opts.Rand) }

// PutKind registers a kind, or updates its description. It reports whether
// the kind is new.
func (s *Sealer) PutKind(ctx context.Context, name, description string) (shredd.Kind, bool, error) {
	return s.reg.PutKind(ctx, name, description)
}

// Kinds lists the registered kinds by name.
func (s *Sealer) Kinds(ctx context.Context) ([]shredd.Kind, error) { return s.reg.Kinds(ctx) }

// ReleaseLease ends a lease early: its holder has dropped the plaintext.
// holder, when not empty, must be the lease's holder (ErrForbidden).
func (s *Sealer) ReleaseLease(ctx context.Context, id shredd.ID, holder string) (shredd.Lease, error) {
	return s.reg.ReleaseLease(ctx, id, holder)
}

// GetArtifact returns a registered artifact.
func (s *Sealer) GetArtifact(ctx context.Context, id shredd.ID) (shredd.Artifact, error) {
	return s.reg.GetArtifact(ctx, id)
}

// plan is a validated source with its lineage resolved.
type plan struct {
	kind    string
	holder  string
	parents []shredd.ID
	direct  map[envelope.SID]bool
	subject map[envelope.SID]string // raw ids of the direct subjects, for the log's commitments; never stored
	reads   []shredd.Read           // the writer's reads and how the source closes each (checkReads)
	writer  string                  // the reader the write answers for (Source.Reader)
	lineage map[envelope.SID]uint32 // parent lineage generations (0: direct-only, take current)
	sids    []envelope.SID          // sorted
}

// resolve validates src and resolves its lineage. known holds the lineages
// of parents read beforehand (a batch's, parentsOf); other parents are read
// from the database.
func (s *Sealer) resolve(ctx context.Context, src shredd.Source, known map[shredd.ID][]envelope.Ref, cache readCache) (*plan, error) {
	if !shredd.ValidKind(src.Kind) {
		return nil, fmt.Errorf("sealing: kind name: %w", shredd.ErrInvalid)
	}
	if src.Holder != "" && !shredd.ValidHolder(src.Holder) {
		return nil, fmt.Errorf("sealing: holder id: %w", shredd.ErrInvalid)
	}
	if len(src.Leases) > registry.MaxParents {
		return nil, fmt.Errorf("sealing: %d leases, at most %d: %w", len(src.Leases), registry.MaxParents, shredd.ErrTooLarge)
	}
	for _, lid := range src.Leases {
		l, err := s.reg.GetLease(ctx, lid)
		if err != nil {
			return nil, leaseErr(lid, err)
		}
		src.Parents = append(src.Parents, l.Artifact)
	}
	reads, err := s.checkReads(ctx, &src, cache)
	if err != nil {
		return nil, err
	}
	if len(src.Subjects) == 0 && len(src.Parents) == 0 {
		return nil, fmt.Errorf("sealing: an artifact needs a subject or a parent: %w", shredd.ErrInvalid)
	}
	if len(src.Subjects) > registry.MaxSubjects {
		return nil, fmt.Errorf("sealing: %d subjects, at most %d: %w", len(src.Subjects), registry.MaxSubjects, shredd.ErrTooLarge)
	}
	if len(src.Parents) > registry.MaxParents {
		return nil, fmt.Errorf("sealing: %d parents, at most %d: %w", len(src.Parents), registry.MaxParents, shredd.ErrTooLarge)
	}
	p := &plan{kind: src.Kind, holder: src.Holder, reads: reads, writer: src.Reader, direct: map[envelope.SID]bool{}, subject: map[envelope.SID]string{}, lineage: map[envelope.SID]uint32{}}
	for i, subj := range src.Subjects {
		if err := registry.CheckSubject(subj); err != nil {
			return nil, fmt.Errorf("subject %d: %w", i, err)
		}
		sid := s.hasher.SID(subj)
		p.direct[sid] = true
		p.subject[sid] = subj
	}
	seen := map[shredd.ID]bool{}
	for _, par := range src.Parents {
		if seen[par] {
			continue
		}
		seen[par] = true
		p.parents = append(p.parents, par)
		refs, ok := known[par]
		if !ok {
			var err error
			if refs, err = s.parentRefs(ctx, par); err != nil {
				return nil, err
			}
		}
		for _, r := range refs {
			if g, ok := p.lineage[r.SID]; ok && g != r.Gen {
				return nil, fmt.Errorf("sealing: parents carry two generations of one subject: %w", shredd.ErrShredded)
			}
			p.lineage[r.SID] = r.Gen
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("sealing: parent %s: %w", par, shredd.ErrUnknownParent)
		}
	}
	all := map[envelope.SID]bool{}
	for sid := range p.direct {
		all[sid] = true
	}
	for sid := range p.lineage {
		all[sid] = true
	}
	if len(all) > envelope.MaxLineage {
		return nil, fmt.Errorf("sealing: lineage of %d subjects, at most %d: %w", len(all), envelope.MaxLineage, shredd.ErrTooLarge)
	}
	for sid := range all {
		p.sids = append(p.sids, sid)
	}
	slices.SortFunc(p.sids, func(a, b envelope.SID) int { return bytes.Compare(a[:], b[:]) })
	return p, nil
}

// leaseErr maps the error of reading a source's lease: an unknown lease is
// an unknown parent.
func leaseErr(lid shredd.ID, err error) error {
	if errors.Is(err, shredd.ErrNotFound) {
		return fmt.Errorf("sealing: lease %s: %w", lid, shredd.ErrUnknownParent)
	}
	return err
}

// parentRefs reads the lineage of one parent artifact; an artifact never
// registered has none, ErrUnknownParent.
func (s *Sealer) parentRefs(ctx context.Context, par shredd.ID) ([]envelope.Ref, error) {
	m, err := s.reg.ParentsOf(ctx, []shredd.ID{par})
	if err != nil {
		return nil, err
	}
	return m[par], nil
}

// keys fetches every subject key of the plan: the current key of a direct
// subject (created on first use), the parent's generation otherwise. Called
// under the barrier read locks.
func (s *Sealer) planKeys(ctx context.Context, p *plan) ([]envelope.SubjectKey, error) {
	out := make([]envelope.SubjectKey, 0, len(p.sids))
	for _, sid := range p.sids {
		var k envelope.SubjectKey
		var err error
		gen, inherited := p.lineage[sid]
		if inherited {
			k, err = s.keys.KeyAt(ctx, envelope.Ref{SID: sid, Gen: gen})
		} else {
			k, err = s.keys.KeyWithSubject(ctx, sid, p.subject[sid])
		}
		if err != nil {
			return nil, s.keyErr(ctx, err, p.refs())
		}
		out = append(out, k)
	}
	return out, nil
}

// refs lists the plan's lineage with the generations known before the keys
// are fetched (0 for a direct subject: its current generation).
func (p *plan) refs() []envelope.Ref {
	out := make([]envelope.Ref, len(p.sids))
	for i, sid := range p.sids {
		out[i] = envelope.Ref{SID: sid, Gen: p.lineage[sid]}
	}
	return out
}

// keyErr maps a key fetch error. When the key backend is unavailable, a
// forgotten subject elsewhere in the lineage still answers ErrShredded: the
// tombstones are local, so the barrier does not depend on the backend.
func (s *Sealer) keyErr(ctx context.Context, err error, refs []envelope.Ref) error {
	if errors.Is(err, keystore.ErrRootUnavailable) {
		for _, r := range refs {
			// r.Gen 0 is a direct subject's current generation (plan.refs);
			// a generation above the newest never existed and erased
			// nothing: not a reason for 410.
			st, gen, serr := s.keys.State(ctx, r.SID)
			if serr == nil && ((st == keystore.SubjectForgotten && r.Gen <= gen) || (r.Gen != 0 && r.Gen < gen)) {
				return fmt.Errorf("%w: a subject of the lineage was forgotten", shredd.ErrShredded)
			}
		}
	}
	return registry.MapKeyErr(err)
}

// registration is the registry's record of an artifact of plan p.
func registration(id shredd.ID, p *plan, refs []envelope.Ref, sealed bool, now time.Time) registry.Registration {
	return registry.Registration{ID: id, Kind: p.kind, Holder: p.holder, Sealed: sealed, Parents: p.parents, Lineage: refs,
		Direct: p.direct, At: now, Reads: p.reads, Writer: p.writer}
}

// inherited lists the leases whose lineage p inherited by its token's policy.
func (p *plan) inherited() []shredd.ID {
	var out []shredd.ID
	for _, r := range p.reads {
		if r.How == shredd.ReadInherited {
			out = append(out, r.Lease)
		}
	}
	return out
}

// record registers the artifact (registry.Queue) and returns once its
// registration committed. The caller holds the barrier read locks of the
// lineage until then, so a forget of one of its subjects cannot commit in
// between.
func (s *Sealer) record(ctx context.Context, id shredd.ID, p *plan, refs []envelope.Ref, sealed bool) (time.Time, error) {
	now := s.opts.Now()
	pending, err := s.reg.Queue(ctx, registration(id, p, refs, sealed, now))
	if err != nil {
		return now, fmt.Errorf("sealing: record: %w", err)
	}
	// Once queued, the request is written or refused by the writer: wait for
	// its answer even if ctx ends, so that the caller's barrier locks cover
	// the write (up to the store timeout where the database has one: the
	// write's transaction checks the lineage live there; registry.Pending.Wait).
	return now, pending.Wait()
}

// Encrypt seals plaintext as a new artifact of src's kind under the keys of
// its whole lineage, bound to context, and registers it. The ciphertext is
// returned only once the registration committed, so nothing sealed after a
// forget's barrier can carry the forgotten subject.
func (s *Sealer) Encrypt(ctx context.Context, src shredd.Source, plaintext, context []byte) (shredd.Sealed, error) {
	var out shredd.Sealed
	// The binary envelope is only the text form's source: it is sealed
	// into a buffer kept for the next call.
	bp := sealBufs.Get().(*[]byte)
	err := s.sealTo(ctx, (*bp)[:0], src, plaintext, context, func(sealed shredd.Sealed, b []byte) {
		out = sealed
		out.Ciphertext = envelope.Text(b)
		if cap(b) <= maxPooledSeal {
			*bp = b[:0]
		}
	})
	sealBufs.Put(bp)
	return out, err
}

// sealBufs holds Encrypt's buffers for binary envelopes (*[]byte), up to
// maxPooledSeal bytes each: they hold ciphertext only.
var sealBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledSeal = 64 << 10

// EncryptBinary is Encrypt answering the binary form of the envelope
// (envelope.Parse reads it) instead of the text form: for large payloads,
// which the text form would grow by a third. It appends the envelope to
// dst (which may be nil), so that a caller can reuse buffers.
func (s *Sealer) EncryptBinary(ctx context.Context, src shredd.Source, plaintext, context, dst []byte) (shredd.Sealed, []byte, error) {
	var sealed shredd.Sealed
	var out []byte
	err := s.sealTo(ctx, dst, src, plaintext, context, func(s shredd.Sealed, b []byte) { sealed, out = s, b })
	return sealed, out, err
}

// checkSealable refuses a plaintext or context the envelope cannot hold,
// before anything is registered.
func checkSealable(plaintext, context []byte) error {
	if len(plaintext) > envelope.MaxPlaintext {
		return fmt.Errorf("sealing: plaintext of %d bytes: %w", len(plaintext), shredd.ErrTooLarge)
	}
	if len(context) > envelope.MaxContext {
		return fmt.Errorf("sealing: context of %d bytes, at most %d: %w", len(context), envelope.MaxContext, shredd.ErrTooLarge)
	}
	return nil
}

// sealTo seals and registers, appending the envelope to dst, then hands
// the result (without its text form) and the binary envelope to done.
func (s *Sealer) sealTo(ctx context.Context, dst []byte, src shredd.Source, plaintext, context []byte, done func(shredd.Sealed, []byte)) error {
	if err := checkSealable(plaintext, context); err != nil {
		return err
	}
	return s.withLineage(ctx, src, func(id shredd.ID, p *plan, keys []envelope.SubjectKey, refs []envelope.Ref) error {
		h, err := envelope.NewHeader(s.opts.Rand, envelope.ArtifactID(id), p.kind, refs)
		if err != nil {
			return fmt.Errorf("sealing: encrypt: %w: %w", shredd.ErrInvalid, err)
		}
		if need := len(plaintext) + 512 + len(refs)*40; cap(dst)-len(dst) < need {
			dst = slices.Grow(dst, need)
		}
		b, err := envelope.AppendSeal(dst, h, keys, plaintext, context)
		if err != nil {
			return fmt.Errorf("sealing: encrypt: %w", err)
		}
		if _, err := s.record(ctx, id, p, refs, true); err != nil {
			return err
		}
		done(shredd.Sealed{Artifact: id, Lineage: len(refs), Inherited: p.inherited()}, b)
		return nil
	})
}

// DataKey registers a new sealed artifact of src, with the checks of
// Encrypt (the barrier, the kind, forgotten parents), and returns its
// envelope header and artifact key: the caller seals one plaintext with them
// (envelope.SealWithKey) and gets the envelope Encrypt would have made. The
// key is returned only once the registration committed. It opens only this
// artifact's envelope: the subject keys never leave the service.
func (s *Sealer) DataKey(ctx context.Context, src shredd.Source) (shredd.DataKey, error) {
	out, errs := s.DataKeys(ctx, []shredd.Source{src})
	return out[0], errs[0]
}

// Register records a plaintext-held artifact: one that lives outside
// shredd (an in-memory ANN vector, a cached prompt) and that its holder must
// purge when a subject of its lineage is forgotten.
func (s *Sealer) Register(ctx context.Context, src shredd.Source) (shredd.Artifact, error) {
	if src.Holder == "" {
		return shredd.Artifact{}, fmt.Errorf("sealing: a plaintext-held artifact needs a holder: %w", shredd.ErrInvalid)
	}
	var out shredd.Artifact
	err := s.withLineage(ctx, src, func(id shredd.ID, p *plan, _ []envelope.SubjectKey, refs []envelope.Ref) error {
		at, err := s.record(ctx, id, p, refs, false)
		if err != nil {
			return err
		}
		out = shredd.Artifact{ID: id, Kind: p.kind, Holder: p.holder, Sealed: false, Parents: p.parents, Lineage: len(refs), CreatedAt: at, Reads: p.reads}
		return nil
	})
	return out, err
}

// withLineage resolves src's lineage, takes the barrier read locks of its
// subjects, fetches their keys and a new artifact id, and runs fn with them
// under the locks: the common part of Encrypt and Register.
func (s *Sealer) withLineage(ctx context.Context, src shredd.Source, fn func(shredd.ID, *plan, []envelope.SubjectKey, []envelope.Ref) error) error {
	p, err := s.resolve(ctx, src, nil, nil)
	if err != nil {
		return err
	}
	unlock := s.reg.RLockSubjects(p.sids)
	defer unlock()
	keys, refs, id, err := s.keysAndID(ctx, p)
	if err != nil {
		return err
	}
	return fn(id, p, keys, refs)
}

// keysAndID fetches the keys of a resolved plan (planKeys), their refs,
// and a new artifact id. Called under the barrier read locks.
func (s *Sealer) keysAndID(ctx context.Context, p *plan) ([]envelope.SubjectKey, []envelope.Ref, shredd.ID, error) {
	keys, err := s.planKeys(ctx, p)
	if err != nil {
		return nil, nil, shredd.ID{}, err
	}
	refs := make([]envelope.Ref, len(keys))
	for i, k := range keys {
		refs[i] = k.Ref
	}
	id, err := s.newID()
	return keys, refs, id, err
}

// Decrypt opens a ciphertext for no named holder; see DecryptFor.
func (s *Sealer) Decrypt(ctx context.Context, ciphertext string, context []byte) (shredd.Opened, error) {
	return s.DecryptFor(ctx, ciphertext, context, shredd.Reader{})
}

// DecryptFor opens a ciphertext with the keys of its lineage and context,
// and records a lease naming the holder that receives the plaintext. The
// lease is durable before the plaintext is returned, and both happen under
// the barrier: a forget either sees the lease or refuses the decrypt. A
// forgotten subject in the lineage gives ErrShredded.
func (s *Sealer) DecryptFor(ctx context.Context, ciphertext string, context []byte, who shredd.Reader) (shredd.Opened, error) {
	if err := validReader(who); err != nil {
		return shredd.Opened{}, err
	}
	env, err := envelope.ParseText(ciphertext)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	return s.open(ctx, env, context, who)
}

// DecryptBinary is DecryptFor for the binary form of an envelope.
func (s *Sealer) DecryptBinary(ctx context.Context, ciphertext, context []byte, who shredd.Reader) (shredd.Opened, error) {
	if err := validReader(who); err != nil {
		return shredd.Opened{}, err
	}
	env, err := envelope.Parse(ciphertext)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	return s.open(ctx, env, context, who)
}

func (s *Sealer) open(ctx context.Context, env *envelope.Envelope, context []byte, who shredd.Reader) (shredd.Opened, error) {
	sids := env.Header.Subjects()
	unlock := s.reg.RLockSubjects(sids)
	defer unlock()
	keys := make([]envelope.SubjectKey, 0, len(sids))
	for _, ref := range env.Header.Lineage {
		k, err := s.keys.KeyAt(ctx, ref)
		if err != nil {
			return shredd.Opened{}, s.keyErr(ctx, err, env.Header.Lineage)
		}
		keys = append(keys, k)
	}
	pt, err := envelope.Open(env, keys, context)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	art := shredd.ID(env.Header.Artifact)
	// The envelope is authentic; the registry must know its artifact too.
	// One that it does not know was sealed after the backup the database
	// was restored from: no forget's dry run, cascade or proof can see it,
	// so it stays closed until it is registered again (Reregister).
	if err := s.checkRegistered(ctx, art); err != nil {
		clear(pt)
		return shredd.Opened{}, err
	}
	l, err := s.reg.IssueLease(ctx, art, who, env.Header.Lineage)
	if err != nil {
		clear(pt)
		return shredd.Opened{}, err
	}
	return shredd.Opened{Artifact: art, Kind: env.Header.Kind, Plaintext: pt, Lease: l}, nil
}

// validReader checks the names of a reader.
func validReader(who shredd.Reader) error {
	if who.Holder != "" && !shredd.ValidHolder(who.Holder) {
		return fmt.Errorf("sealing: holder id: %w", shredd.ErrInvalid)
	}
	if who.Unit != "" && !shredd.ValidUnit(who.Unit) {
		return fmt.Errorf("sealing: unit id: %w", shredd.ErrInvalid)
	}
	return nil
}

// checkRegistered returns an error wrapping shredd.ErrUnknownArtifact when
// the registry holds no artifact id. Artifacts are never deleted, and an
// envelope is handed out only once its artifact committed, so the only
// way to an authentic envelope of an unknown artifact is a database older
// than the envelope.
func (s *Sealer) checkRegistered(ctx context.Context, id shredd.ID) error {
	ok, err := s.reg.Registered(ctx, id)
	if err == nil && !ok {
		return fmt.Errorf("sealing: decrypt: artifact %s: %w: the database is probably older than the ciphertext "+
			"(restored from a backup taken before it was sealed); an operator can register it again from its envelope "+
			"(shredd reregister, POST /v1/artifacts/reregister)", id, shredd.ErrUnknownArtifact)
	}
	if err != nil {
		return fmt.Errorf("sealing: decrypt: %w", err)
	}
	return nil
}
