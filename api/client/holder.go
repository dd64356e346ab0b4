package client

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/shredd/shredd/attest"
)

// The holder calls: a holder is a component that keeps artifacts outside
// shredd in plaintext (an ANN index of embeddings, a prompt cache). It
// registers an Ed25519 key, pulls its purge work after a forget, purges,
// and answers with an ack signed by that key (docs/attestation.md §6); it
// reports what it holds, so that shredd can tell when it holds more than
// was registered. The methods on Client are the routes one to one; Holder
// is the kit that runs the loop for a holder written in Go.
//
// The only shredd package the client imports is attest, for the ack
// message: a format package that imports nothing but the standard library.

// HolderInfo is a registered holder (POST /v1/holders).
type HolderInfo struct {
	ID        string
	PublicKey ed25519.PublicKey
	CreatedAt time.Time
}

// PurgeWork is what one forget asks of one holder: the holder's
// plaintext-held artifacts of the forget's lineage that it has not yet
// acknowledged as purged.
type PurgeWork struct {
	Forget    string   `json:"forget"`
	Artifacts []string `json:"artifacts"`
}

// AckResult is the answer to an ack: the artifacts it closed, and those of
// the holder in the forget that remain open.
type AckResult struct {
	Closed  []string `json:"closed"`
	Missing []string `json:"missing"`
}

// InventoryItem is one artifact a holder holds, by id and kind. The kind
// matters: an artifact of a kind shredd does not know breaks the closure of
// every forget.
type InventoryItem struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// InventoryReport is shredd's reading of an inventory. Any of the three
// lists non-empty means the holder holds what shredd cannot account for,
// and every open forget is blocked until a clean inventory.
type InventoryReport struct {
	Items            int      `json:"items"`
	UnknownArtifacts []string `json:"unknown_artifacts"` // never registered for this holder
	UnknownKinds     []string `json:"unknown_kinds"`
	ContradictedAcks []string `json:"contradicted_acks"` // acked as purged, still listed
}

// Clean reports whether the inventory accounts for everything the holder
// holds.
func (r InventoryReport) Clean() bool {
	return len(r.UnknownArtifacts) == 0 && len(r.UnknownKinds) == 0 && len(r.ContradictedAcks) == 0
}

// RegisterHolder registers holder id with its Ed25519 public key (admin
// scope); created reports whether it is new. Registering the same key again
// is accepted; another key for the same id is a 409 conflict.
func (c *Client) RegisterHolder(ctx context.Context, id string, pub ed25519.PublicKey) (h HolderInfo, created bool, err error) {
	if len(pub) != ed25519.PublicKeySize {
		return HolderInfo{}, false, fmt.Errorf("shredd: RegisterHolder: public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	var out struct {
		Holder    string    `json:"holder"`
		PublicKey []byte    `json:"public_key"`
		CreatedAt time.Time `json:"created_at"`
	}
	status, _, err := c.call(ctx, http.MethodPost, "/v1/holders",
		map[string]string{"holder": id, "public_key": base64.StdEncoding.EncodeToString(pub)}, &out)
	if err != nil {
		return HolderInfo{}, false, err
	}
	return HolderInfo{ID: out.Holder, PublicKey: ed25519.PublicKey(out.PublicKey), CreatedAt: out.CreatedAt}, status == http.StatusCreated, nil
}

// Purges returns holder's purge work: per open forget, its artifacts still
// to purge and acknowledge (register or audit scope; a holder-bound token
// only for its own holder).
func (c *Client) Purges(ctx context.Context, holder string) ([]PurgeWork, error) {
	var out struct {
		Purges []PurgeWork `json:"purges"`
	}
	_, _, err := c.call(ctx, http.MethodGet, "/v1/holders/"+url.PathEscape(holder)+"/purges", nil, &out)
	return out.Purges, err
}

// Ack sends a signed purge ack (register scope): signature is the holder's
// Ed25519 signature over attest.AckMessage(forget, holder, artifacts).
// Holder.Ack signs and sends in one call; this one is for a holder whose
// key lives elsewhere (an HSM, another process).
func (c *Client) Ack(ctx context.Context, forget, holder string, artifacts []string, signature []byte) (AckResult, error) {
	var out AckResult
	_, _, err := c.call(ctx, http.MethodPost, "/v1/forgets/"+url.PathEscape(forget)+"/acks",
		map[string]any{"holder": holder, "artifacts": artifacts, "signature": base64.StdEncoding.EncodeToString(signature)}, &out)
	return out, err
}

// ReportInventory reports everything holder holds (register scope). Send
// the whole inventory each time: it replaces the previous one.
func (c *Client) ReportInventory(ctx context.Context, holder string, items []InventoryItem) (InventoryReport, error) {
	if items == nil {
		items = []InventoryItem{} // an empty inventory is [], not null
	}
	var out InventoryReport
	_, _, err := c.call(ctx, http.MethodPost, "/v1/holders/"+url.PathEscape(holder)+"/inventory",
		map[string]any{"artifacts": items}, &out)
	return out, err
}

// PurgeFunc deletes, in the holder's own store, the plaintext of artifacts
// for forget, and returns the ids it purged. Return only what is gone: the
// kit signs for exactly those, and a signature over an artifact still held
// is a false ack that a later inventory exposes (contradicted_acks). An
// error with some ids purged acks those and reports the error.
type PurgeFunc func(ctx context.Context, forget string, artifacts []string) (purged []string, err error)

// Holder is the holder kit: one holder's id, its Ed25519 key and a client
// whose token may act as it (the register scope, best bound to the
// holder: shredd token create --scopes register --holder ID).
//
//	h, err := client.NewHolder(c, "ann-index-1", key)
//	err = h.Register(ctx, admin)                 // once, with an admin client
//	res, err := h.PurgeOnce(ctx, index.Purge)    // or h.Run(ctx, 10*time.Second, index.Purge, nil)
type Holder struct {
	c   *Client
	id  string
	key ed25519.PrivateKey
}

// NewHolder returns the kit of holder id, which signs its acks with key
// and calls shredd through c.
func NewHolder(c *Client, id string, key ed25519.PrivateKey) (*Holder, error) {
	if c == nil {
		return nil, errors.New("shredd: NewHolder: nil client")
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("shredd: NewHolder: private key of %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if id == "" {
		return nil, errors.New("shredd: NewHolder: empty holder id")
	}
	return &Holder{c: c, id: id, key: key}, nil
}

// ID returns the holder's id.
func (h *Holder) ID() string { return h.id }

// PublicKey returns the public half of the holder's key, the one to
// register.
func (h *Holder) PublicKey() ed25519.PublicKey { return h.key.Public().(ed25519.PublicKey) }

// Register registers the holder and its public key through admin, a client
// with the admin scope (registering a holder is an operator's decision, so
// the holder's own token usually cannot); nil uses the kit's client.
func (h *Holder) Register(ctx context.Context, admin *Client) (created bool, err error) {
	if admin == nil {
		admin = h.c
	}
	_, created, err = admin.RegisterHolder(ctx, h.id, h.PublicKey())
	return created, err
}

// Purges returns the holder's purge work.
func (h *Holder) Purges(ctx context.Context) ([]PurgeWork, error) { return h.c.Purges(ctx, h.id) }

// Ack signs, with the holder's key, the message of docs/attestation.md §6
// (attest.AckMessage: the label, the forget, the holder, the artifact ids
// sorted) and sends it.
func (h *Holder) Ack(ctx context.Context, forget string, artifacts []string) (AckResult, error) {
	a, err := attest.SignAck(forget, h.id, artifacts, h.key)
	if err != nil {
		return AckResult{}, fmt.Errorf("shredd: ack of forget %s: %w", forget, err)
	}
	return h.c.Ack(ctx, forget, h.id, a.Artifacts, a.Signature)
}

// ReportInventory reports everything the holder holds.
func (h *Holder) ReportInventory(ctx context.Context, items []InventoryItem) (InventoryReport, error) {
	return h.c.ReportInventory(ctx, h.id, items)
}

// PurgeRound is what one PurgeOnce did.
type PurgeRound struct {
	Work  []PurgeWork // the work fetched
	Acked []AckResult // one per ack sent, in the order of Work
	// Errors holds one error per forget that failed (its purge, or its
	// ack); the other forgets went on.
	Errors []error
}

// Err returns the round's errors joined, or nil.
func (r PurgeRound) Err() error { return errors.Join(r.Errors...) }

// PurgeOnce fetches the holder's purge work and, for each forget, calls
// purge and acks what it purged. purge may return only ids it was asked
// for: the kit refuses to sign for anything else. A failing forget does not
// stop the others; the returned error is only for a failure to fetch the
// work.
func (h *Holder) PurgeOnce(ctx context.Context, purge PurgeFunc) (PurgeRound, error) {
	work, err := h.Purges(ctx)
	if err != nil {
		return PurgeRound{}, err
	}
	round := PurgeRound{Work: work}
	for _, w := range work {
		if err := ctx.Err(); err != nil {
			return round, err
		}
		purged, perr := purge(ctx, w.Forget, slices.Clone(w.Artifacts))
		if perr != nil {
			round.Errors = append(round.Errors, fmt.Errorf("shredd: purge for forget %s: %w", w.Forget, perr))
		}
		if len(purged) == 0 {
			continue
		}
		asked := make(map[string]bool, len(w.Artifacts))
		for _, id := range w.Artifacts {
			asked[id] = true
		}
		if i := slices.IndexFunc(purged, func(id string) bool { return !asked[id] }); i >= 0 {
			round.Errors = append(round.Errors, fmt.Errorf("shredd: purge for forget %s returned artifact %q, which the forget did not ask for: nothing acked", w.Forget, purged[i]))
			continue
		}
		res, err := h.Ack(ctx, w.Forget, dedupe(purged))
		if err != nil {
			round.Errors = append(round.Errors, err)
			continue
		}
		round.Acked = append(round.Acked, res)
	}
	return round, nil
}

// Run calls PurgeOnce every interval until ctx ends, and returns ctx's
// error. report, when not nil, sees each round and each error (a failed
// fetch is a round with that error and no work); Run itself never stops
// on an error, since the next round retries what is still open.
func (h *Holder) Run(ctx context.Context, interval time.Duration, purge PurgeFunc, report func(PurgeRound)) error {
	if interval <= 0 {
		return errors.New("shredd: Holder.Run: interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		round, err := h.PurgeOnce(ctx, purge)
		if err != nil && ctx.Err() == nil {
			round.Errors = append(round.Errors, err)
		}
		if report != nil && ctx.Err() == nil {
			report(round)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// dedupe returns ids without repeats, in their first order.
func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
