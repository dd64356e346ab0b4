package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/shredd/shredd/attest"
)

// ProbeWork is a probe a holder must answer (docs/api.md "Probes"): does
// its retrieval path still return any of these artifacts or markers?
type ProbeWork struct {
	Probe     string    `json:"probe"`
	Forget    string    `json:"forget"`
	Nonce     string    `json:"nonce"`
	Artifacts []string  `json:"artifacts"`
	Markers   []string  `json:"markers"`
	Deadline  time.Time `json:"deadline"`
}

// ProbeResult is shredd's reading of an answer: Clean when the holder's
// path returned nothing it was asked about.
type ProbeResult struct {
	Probe string `json:"probe"`
	Clean bool   `json:"clean"`
}

// Probes are the probe routes of the holders (docs/api.md "Probes"), for
// a holder whose key lives elsewhere (an HSM, another process): the
// Holder kit signs and sends in one call (Holder.ProbeOnce).
type Probes struct{ c *Client }

// NewProbes returns the probe routes, called through c.
func NewProbes(c *Client) *Probes { return &Probes{c: c} }

// Declare records that holder answers probes through its retrieval path,
// with compaction interval compact (1s to 720h; 0 withdraws).
func (p *Probes) Declare(ctx context.Context, holder string, compact time.Duration) error {
	c := p.c
	path := "/v1/holders/" + url.PathEscape(holder) + "/probe"
	var out struct {
		Holder          string  `json:"holder"`
		CompactInterval *string `json:"compact_interval"`
	}
	if compact == 0 {
		_, _, err := c.call(ctx, http.MethodDelete, path, nil, &out)
		return err
	}
	_, _, err := c.call(ctx, http.MethodPut, path, map[string]string{"compact_interval": compact.String()}, &out)
	return err
}

// Open returns the probes holder must answer now.
func (p *Probes) Open(ctx context.Context, holder string) ([]ProbeWork, error) {
	c := p.c
	var out struct {
		Probes []ProbeWork `json:"probes"`
	}
	_, _, err := c.call(ctx, http.MethodGet, "/v1/holders/"+url.PathEscape(holder)+"/probes", nil, &out)
	return out.Probes, err
}

// Answer sends a holder's signed answer to a probe: signature is its
// Ed25519 signature over attest.ProbeMessage.
func (p *Probes) Answer(ctx context.Context, holder, probe string, found []string, signature []byte) (ProbeResult, error) {
	c := p.c
	if found == nil {
		found = []string{}
	}
	var out ProbeResult
	_, _, err := c.call(ctx, http.MethodPost, "/v1/holders/"+url.PathEscape(holder)+"/probes/"+url.PathEscape(probe),
		map[string]any{"found": found, "signature": base64.StdEncoding.EncodeToString(signature)}, &out)
	return out, err
}

// ProbeFunc runs the holder application's own retrieval path (the same
// index, caches and replicas its queries go through) for artifacts and
// markers, and returns those it still returns. Looking in the primary
// store alone is not a probe: a cached vector the path still serves is
// exactly what a probe must find.
type ProbeFunc func(ctx context.Context, forget string, artifacts, markers []string) (found []string, err error)

// DeclareProbes records that the holder answers probes, with its
// compaction interval (0 withdraws).
func (h *Holder) DeclareProbes(ctx context.Context, compact time.Duration) error {
	return NewProbes(h.c).Declare(ctx, h.id, compact)
}

// ProbeRound is what one ProbeOnce did.
type ProbeRound struct {
	Work     []ProbeWork
	Answered []ProbeResult
	Errors   []error
}

// Err returns the round's errors joined, or nil.
func (r ProbeRound) Err() error { return errors.Join(r.Errors...) }

// ProbeOnce fetches the holder's open probes and answers each: probe's
// findings (only ids and markers it was asked about), signed with the
// holder's key over attest.ProbeMessage. A probe whose function fails is
// not answered (it is asked again after its deadline); the others go on.
func (h *Holder) ProbeOnce(ctx context.Context, probe ProbeFunc) (ProbeRound, error) {
	work, err := NewProbes(h.c).Open(ctx, h.id)
	if err != nil {
		return ProbeRound{}, err
	}
	round := ProbeRound{Work: work}
	for _, w := range work {
		found, perr := probe(ctx, w.Forget, slices.Clone(w.Artifacts), slices.Clone(w.Markers))
		if perr != nil {
			round.Errors = append(round.Errors, fmt.Errorf("shredd: probe %s: %w", w.Probe, perr))
			continue
		}
		found = dedupe(found)
		asked := append(slices.Clone(w.Artifacts), w.Markers...)
		if i := slices.IndexFunc(found, func(f string) bool { return !slices.Contains(asked, f) }); i >= 0 {
			round.Errors = append(round.Errors, fmt.Errorf("shredd: probe %s: the path returned %q, which was not asked: nothing answered", w.Probe, found[i]))
			continue
		}
		sig, err := attest.SignProbe(w.Probe, w.Forget, h.id, w.Nonce, w.Artifacts, w.Markers, found, h.key)
		if err != nil {
			round.Errors = append(round.Errors, err)
			continue
		}
		res, err := NewProbes(h.c).Answer(ctx, h.id, w.Probe, found, sig)
		if err != nil {
			round.Errors = append(round.Errors, err)
			continue
		}
		round.Answered = append(round.Answered, res)
	}
	return round, nil
}
