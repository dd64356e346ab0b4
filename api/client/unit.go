package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrUnitClosed is the error of a call through a Unit after its Close.
var ErrUnitClosed = errors.New("shredd: the unit of work is closed")

// Unit is a unit of work: the reads (decrypts) of one task and the writes
// it makes from them (a summarizer's pass, an agent's step). Reads are
// lineage: a write made while its token holds attributable reads (leases
// not yet expired, released or not) must name them or declare itself
// independent of them, or the server refuses it (IsUndeclaredDerivation)
// or gives it their lineage, as the token's policy says (docs/api.md).
// A Unit does the bookkeeping: every call through it carries the unit's
// random label (ID), each decrypt records its lease, and each write
// (Encrypt, EncryptRaw, Seal, SealMany, Register and their batches) names
// every lease the unit recorded so far, merged with the request's own
// Leases. The label also keeps the unit's writes from answering for the
// reads of the token's other units.
//
// Close releases the unit's leases (the plaintexts are dropped); the reads
// stay in the lineage of what the unit wrote. A Unit is safe for
// concurrent use; a write names the leases of the decrypts that returned
// before it was sent. A write names at most 256 leases (MaxParents on the
// server): a unit is one task's reads, not a whole process's.
type Unit struct {
	c  *Client
	id string

	mu     sync.Mutex
	leases []string
	closed bool
}

// Unit starts a unit of work with a fresh random label (16 hex digits).
func (c *Client) Unit() *Unit {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return &Unit{c: c, id: hex.EncodeToString(b[:])}
}

// ID returns the unit's label, sent as "unit" on each of its calls.
func (u *Unit) ID() string { return u.id }

// Leases returns the ids of the leases the unit's decrypts took, in the
// order they were recorded.
func (u *Unit) Leases() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.leases)
}

// begin returns the leases recorded so far, or ErrUnitClosed.
func (u *Unit) begin(op string) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, fmt.Errorf("shredd: %s: %w", op, ErrUnitClosed)
	}
	return slices.Clone(u.leases), nil
}

// record adds lease ids taken by a decrypt of the unit.
func (u *Unit) record(ids ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if id != "" && !slices.Contains(u.leases, id) {
			u.leases = append(u.leases, id)
		}
	}
}

// merge returns the unit's leases followed by those of own not among them.
func merge(unit, own []string) []string {
	out := unit
	for _, id := range own {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// label sets the unit's label on a request, refusing another one.
func (u *Unit) label(op string, have *string) error {
	if *have != "" && *have != u.id {
		return fmt.Errorf("shredd: %s: the request names unit %q, not the unit's own %q", op, *have, u.id)
	}
	*have = u.id
	return nil
}

// write readies req as a write of the unit: its label, and its leases
// merged with the unit's.
func (u *Unit) write(op string, req *EncryptRequest, leases []string) error {
	if err := u.label(op, &req.Unit); err != nil {
		return err
	}
	req.Leases = merge(slices.Clone(leases), req.Leases)
	return nil
}

// Decrypt is Client.Decrypt as a read of the unit: its lease is recorded.
func (u *Unit) Decrypt(ctx context.Context, req DecryptRequest) (DecryptResponse, error) {
	const op = "POST /v1/decrypt"
	if _, err := u.begin(op); err != nil {
		return DecryptResponse{}, err
	}
	if err := u.label(op, &req.Unit); err != nil {
		return DecryptResponse{}, err
	}
	out, err := u.c.Decrypt(ctx, req)
	if err == nil {
		u.record(out.Lease.ID)
	}
	return out, err
}

// DecryptBatch is Client.DecryptBatch as reads of the unit: the lease of
// every item that opened is recorded.
func (u *Unit) DecryptBatch(ctx context.Context, reqs []DecryptRequest) ([]DecryptResult, error) {
	const op = "POST /v1/decrypt"
	if _, err := u.begin(op); err != nil {
		return nil, err
	}
	reqs = slices.Clone(reqs)
	for i := range reqs {
		if err := u.label(op, &reqs[i].Unit); err != nil {
			return nil, err
		}
	}
	out, err := u.c.DecryptBatch(ctx, reqs)
	for _, r := range out {
		if r.Err == nil {
			u.record(r.Lease.ID)
		}
	}
	return out, err
}

// DecryptRaw is Client.DecryptRaw as a read of the unit: its lease is
// recorded.
func (u *Unit) DecryptRaw(ctx context.Context, envelope, context []byte, holder string) (RawDecryptResponse, error) {
	if _, err := u.begin("POST /v1/decrypt/raw"); err != nil {
		return RawDecryptResponse{}, err
	}
	out, err := u.c.decryptRaw(ctx, envelope, context, holder, u.id)
	if err == nil {
		u.record(out.LeaseID)
	}
	return out, err
}

// Encrypt is Client.Encrypt as a write of the unit: it names the unit's
// leases.
func (u *Unit) Encrypt(ctx context.Context, req EncryptRequest) (EncryptResponse, error) {
	if err := u.writeOne("POST /v1/encrypt", &req); err != nil {
		return EncryptResponse{}, err
	}
	return u.c.Encrypt(ctx, req)
}

// writeOne readies req as a write of the unit.
func (u *Unit) writeOne(op string, req *EncryptRequest) error {
	leases, err := u.begin(op)
	if err != nil {
		return err
	}
	return u.write(op, req, leases)
}

// writes readies each request of a batch as a write of the unit.
func (u *Unit) writes(op string, reqs []EncryptRequest) ([]EncryptRequest, error) {
	leases, err := u.begin(op)
	if err != nil {
		return nil, err
	}
	reqs = slices.Clone(reqs)
	for i := range reqs {
		if err := u.write(op, &reqs[i], leases); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// EncryptBatch is Client.EncryptBatch as writes of the unit: each item
// names the unit's leases.
func (u *Unit) EncryptBatch(ctx context.Context, reqs []EncryptRequest) ([]EncryptResult, error) {
	reqs, err := u.writes("POST /v1/encrypt", reqs)
	if err != nil {
		return nil, err
	}
	return u.c.EncryptBatch(ctx, reqs)
}

// EncryptRaw is Client.EncryptRaw as a write of the unit: it names the
// unit's leases (in request headers).
func (u *Unit) EncryptRaw(ctx context.Context, req EncryptRequest) (RawEncryptResponse, error) {
	if err := u.writeOne("POST /v1/encrypt/raw", &req); err != nil {
		return RawEncryptResponse{}, err
	}
	return u.c.EncryptRaw(ctx, req)
}

// Seal is Client.Seal as a write of the unit: it names the unit's leases.
func (u *Unit) Seal(ctx context.Context, req EncryptRequest) (SealResult, error) {
	return u.SealTo(ctx, nil, req)
}

// SealTo is Client.SealTo as a write of the unit.
func (u *Unit) SealTo(ctx context.Context, buf []byte, req EncryptRequest) (SealResult, error) {
	if err := u.writeOne("POST /v1/datakey", &req); err != nil {
		return SealResult{}, err
	}
	return u.c.SealTo(ctx, buf, req)
}

// SealMany is Client.SealMany as writes of the unit: each item names the
// unit's leases.
func (u *Unit) SealMany(ctx context.Context, reqs []EncryptRequest) ([]SealResult, error) {
	return u.SealManyTo(ctx, nil, reqs)
}

// SealManyTo is Client.SealManyTo as writes of the unit.
func (u *Unit) SealManyTo(ctx context.Context, bufs [][]byte, reqs []EncryptRequest) ([]SealResult, error) {
	reqs, err := u.writes("POST /v1/datakey", reqs)
	if err != nil {
		return nil, err
	}
	return u.c.SealManyTo(ctx, bufs, reqs)
}

// Register is Client.Register as a write of the unit: the plaintext-held
// artifact names the unit's leases.
func (u *Unit) Register(ctx context.Context, req RegisterRequest) (Artifact, error) {
	const op = "POST /v1/artifacts"
	leases, err := u.begin(op)
	if err == nil {
		err = u.label(op, &req.Unit)
	}
	if err != nil {
		return Artifact{}, err
	}
	req.Leases = merge(leases, req.Leases)
	return u.c.Register(ctx, req)
}

// Close ends the unit: it releases every lease the unit recorded (a
// forget no longer waits for them) and refuses further calls
// (ErrUnitClosed). It returns the releases' errors, joined; a lease whose
// release failed ends at its expiry. Closing again does nothing. The
// usual form keeps the caller's own error first:
//
//	u := c.Unit()
//	defer func() { err = errors.Join(err, u.Close(ctx)) }()
func (u *Unit) Close(ctx context.Context) error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	leases := u.leases
	u.mu.Unlock()
	var errs []error
	for _, id := range leases {
		if _, err := u.c.ReleaseLease(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
