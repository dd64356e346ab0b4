package client

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/shredd/shredd/envelope"
)

// Client-side sealing: POST /v1/datakey registers each artifact and answers
// its envelope header and artifact key; the client seals the plaintext
// itself, so the plaintext never crosses the network. The artifact key is
// as secret as the plaintext: the client clears it once it has sealed.

// SealResult is an artifact sealed on the client: Envelope is the binary
// envelope (what DecryptRaw opens), Ciphertext its text form (what Decrypt
// opens). Err is set when the item failed: nothing was sealed then.
type SealResult struct {
	Artifact    string
	Envelope    []byte
	LineageSize int
	Err         *Error
}

// Ciphertext returns the text form of the envelope ("shredd:v1:...").
func (r SealResult) Ciphertext() string {
	if r.Envelope == nil {
		return ""
	}
	return envelope.Text(r.Envelope)
}

// dataKeyWire is one item of POST /v1/datakey: an encrypt without the
// plaintext and context, which stay on the client.
type dataKeyWire struct {
	Subjects []string `json:"subjects,omitempty"`
	Parents  []string `json:"parents,omitempty"`
	Leases   []string `json:"leases,omitempty"`
	Kind     string   `json:"kind"`
	Holder   string   `json:"holder,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	// Independent and IndependentOf declare the reads the data does not
	// derive from (docs/api.md, "What a read costs a writer").
	Independent   bool     `json:"independent,omitempty"`
	IndependentOf []string `json:"independent_of,omitempty"`
}

func (r EncryptRequest) dataKeyWire() dataKeyWire {
	return dataKeyWire{Subjects: r.Subjects, Parents: r.Parents, Leases: r.Leases, Kind: r.Kind, Holder: r.Holder,
		Unit: r.Unit, Independent: r.Independent, IndependentOf: r.IndependentOf}
}

// dataKeyAnswer is the server's answer for one item: key material.
type dataKeyAnswer struct {
	Artifact    string `json:"artifact"`
	Header      []byte `json:"header"`
	Key         []byte `json:"key"`
	LineageSize int    `json:"lineage_size"`
	Err         *Error `json:"error,omitempty"`
}

// Seal seals one artifact on the client (see SealMany). The error is the
// item's or the call's.
func (c *Client) Seal(ctx context.Context, req EncryptRequest) (SealResult, error) {
	return c.SealTo(ctx, nil, req)
}

// SealTo is Seal with the envelope written into buf's storage: the
// result's Envelope is the envelope appended to buf[:0]. A writer that
// seals large records one after another, each written out before the next
// is sealed, passes the last result's Envelope back as buf, and once it
// is large enough sealing allocates nothing per record (Seal allocates
// the envelope each time, and the garbage collector then works for every
// record). buf must not be in use elsewhere: its bytes are overwritten.
func (c *Client) SealTo(ctx context.Context, buf []byte, req EncryptRequest) (SealResult, error) {
	if err := envelope.CheckSizes(req.Plaintext, req.Context); err != nil {
		return SealResult{}, fmt.Errorf("shredd: POST /v1/datakey: %w", err)
	}
	if err := checkBuffers([][]byte{buf}, []EncryptRequest{req}); err != nil {
		return SealResult{}, fmt.Errorf("shredd: POST /v1/datakey: %w", err)
	}
	var a dataKeyAnswer
	if _, _, err := c.call(ctx, http.MethodPost, "/v1/datakey", req.dataKeyWire(), &a); err != nil {
		return SealResult{}, err
	}
	r, err := sealItem(buf[:0], &a, req)
	if err != nil {
		return SealResult{}, fmt.Errorf("shredd: POST /v1/datakey: %w", err)
	}
	return r, nil
}

// SealMany seals up to MaxBatch artifacts on the client: one POST
// /v1/datakey batch registers them all (with the checks of Encrypt: the
// forget barrier, the kind, forgotten parents), then each plaintext is
// sealed here, on every core, with its artifact's key, which is then
// cleared. The envelopes are exactly those Encrypt would answer, and
// Decrypt opens them. It returns one result per request, in order; an item
// that failed has Err set, and the others took effect (registrations are
// not rolled back). The error is for the call as a whole.
func (c *Client) SealMany(ctx context.Context, reqs []EncryptRequest) ([]SealResult, error) {
	return c.SealManyTo(ctx, nil, reqs)
}

// SealManyTo is SealMany with each envelope written into a buffer of bufs
// (nil: none), as SealTo does: item i's Envelope is appended to
// bufs[i][:0]. bufs, when given, has one buffer per request; passing the
// last call's Envelopes back reuses their storage.
func (c *Client) SealManyTo(ctx context.Context, bufs [][]byte, reqs []EncryptRequest) ([]SealResult, error) {
	if bufs != nil && len(bufs) != len(reqs) {
		return nil, fmt.Errorf("shredd: POST /v1/datakey: %w: %d buffers for %d items", envelope.ErrInvalid, len(bufs), len(reqs))
	}
	if err := checkBuffers(bufs, reqs); err != nil {
		return nil, fmt.Errorf("shredd: POST /v1/datakey: %w", err)
	}
	in := struct {
		BatchInput []dataKeyWire `json:"batch_input"`
	}{make([]dataKeyWire, len(reqs))}
	for i, r := range reqs {
		if err := envelope.CheckSizes(r.Plaintext, r.Context); err != nil {
			return nil, fmt.Errorf("shredd: POST /v1/datakey (item %d): %w", i, err)
		}
		in.BatchInput[i] = r.dataKeyWire()
	}
	var out struct {
		BatchResults []dataKeyAnswer `json:"batch_results"`
	}
	_, hdr, err := c.call(ctx, http.MethodPost, "/v1/datakey", in, &out)
	defer func() {
		for i := range out.BatchResults {
			clear(out.BatchResults[i].Key)
		}
	}()
	if err != nil {
		return nil, err
	}
	if len(out.BatchResults) != len(reqs) {
		return nil, fmt.Errorf("shredd: POST /v1/datakey: %d results for %d items", len(out.BatchResults), len(reqs))
	}
	res := make([]SealResult, len(reqs))
	errs := make([]error, len(reqs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a := &out.BatchResults[i]
				if a.Err != nil {
					itemError(a.Err, "POST /v1/datakey", i, hdr)
					res[i] = SealResult{Err: a.Err}
					continue
				}
				var buf []byte
				if bufs != nil {
					buf = bufs[i][:0]
				}
				res[i], errs[i] = sealItem(buf, a, reqs[i])
			}
		}()
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			// The server answered a data key this client cannot use: a
			// fault of the call, not of the item.
			return nil, fmt.Errorf("shredd: POST /v1/datakey (item %d): %w", i, err)
		}
	}
	return res, nil
}

// checkBuffers refuses buffers that share memory with each other or with
// a plaintext or context of reqs: sealing writes into a buffer's whole
// capacity, so another item's buffer would be overwritten (items seal in
// parallel) and a plaintext read while it is overwritten (AES-GCM panics
// on such an overlap). Plaintexts and contexts may share memory among
// themselves. It is checked before anything is registered.
func checkBuffers(bufs [][]byte, reqs []EncryptRequest) error {
	type span struct {
		start, end uintptr
		buf        bool
	}
	var spans []span
	add := func(b []byte, capacity, buf bool) {
		n := len(b)
		if capacity {
			n = cap(b)
		}
		if n > 0 {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			spans = append(spans, span{p, p + uintptr(n), buf})
		}
	}
	for _, b := range bufs {
		add(b, true, true)
	}
	if len(spans) == 0 {
		return nil
	}
	for _, r := range reqs {
		add(r.Plaintext, false, false)
		add(r.Context, false, false)
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var maxEnd, maxBufEnd uintptr // of the spans before, all and buffers only
	for _, s := range spans {
		if (s.buf && maxEnd > s.start) || maxBufEnd > s.start {
			return fmt.Errorf("%w: a buffer shares memory with another buffer, a plaintext or a context", envelope.ErrInvalid)
		}
		maxEnd = max(maxEnd, s.end)
		if s.buf {
			maxBufEnd = max(maxBufEnd, s.end)
		}
	}
	return nil
}

// sealItem seals req's plaintext with the data key of a and clears the key.
func sealItem(dst []byte, a *dataKeyAnswer, req EncryptRequest) (SealResult, error) {
	dk := envelope.DataKey{Header: a.Header, Key: a.Key}
	defer dk.Clear()
	b, err := envelope.SealWithKey(dst, dk, req.Plaintext, req.Context)
	if err != nil {
		return SealResult{}, err
	}
	return SealResult{Artifact: a.Artifact, Envelope: b, LineageSize: a.LineageSize}, nil
}
