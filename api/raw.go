package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// DefaultMaxRawBody bounds the body of the raw-body routes: the largest
// plaintext the envelope format allows (64 MiB) plus room for an envelope's
// header with a full lineage (1,024 subjects of 36 bytes, the kind, salt and
// nonce: under 64 KiB).
const DefaultMaxRawBody = envelope.MaxPlaintext + 64<<10

// Headers of the raw-body routes. The request headers carry what the JSON
// routes take as fields; subject ids travel only in them (never in the URL).
const (
	HeaderSubject     = "Shredd-Subject" // one header line per subject id
	HeaderParent      = "Shredd-Parent"  // one line per parent artifact id
	HeaderLease       = "Shredd-Lease"   // encrypt: one line per lease id; decrypt answer: the lease id
	HeaderKind        = "Shredd-Kind"
	HeaderHolder      = "Shredd-Holder"
	HeaderContext     = "Shredd-Context" // standard base64, as the JSON field
	HeaderArtifact    = "Shredd-Artifact"
	HeaderLineageSize = "Shredd-Lineage-Size"
	HeaderLeaseExpiry = "Shredd-Lease-Expires" // RFC 3339
	// The writer's reads (docs/api.md "What a read costs a writer").
	HeaderUnit          = "Shredd-Unit"           // the unit of work (decrypt and encrypt)
	HeaderIndependent   = "Shredd-Independent"    // encrypt: "true" declares every unnamed read independent
	HeaderIndependentOf = "Shredd-Independent-Of" // encrypt: one line per lease id, or comma-separated
	HeaderInherited     = "Shredd-Inherited"      // encrypt answer: the leases inherited by the token's policy, comma-separated
)

// rawRoutes are the routes whose bodies are bounded by maxRawBody instead
// of maxBody.
var rawRoutes = map[string]bool{"/v1/encrypt/raw": true, "/v1/decrypt/raw": true}

// Raw bodies and answers take buffers of a few sizes (classes): a
// capacity of 2^k + rawClassSlack bytes, for k from rawMinShift (256 KiB)
// to rawMaxShift (4 MiB), each class with a pool of its own. Allocating
// (and zeroing) a megabyte twice per request costs about as much as its
// AES-GCM, so buffers are recycled; with one pool of any sizes, a buffer
// taken was often too small for the body (one of the smaller ones its
// growth had left there), went back, and a new one was made beside it,
// and the pool filled with buffers of every size: at 16 clients of 1 MiB
// bodies the server held 400 to 870 MiB. A class's buffer fits what it is
// taken for, and goes back to its class. The slack makes a body of 2^k
// bytes (plus the byte of the read that meets EOF), and an envelope of a
// 2^k-byte plaintext (its header under 64 KiB), fit the 2^k class. Buffers
// that held plaintext are cleared before they go back; larger ones (up to
// MaxRawBody) are made for the request and dropped.
const (
	rawMinShift   = 18
	rawMaxShift   = 22
	rawClassSlack = 64 << 10
	// rawPoolMax is the capacity of the largest class.
	rawPoolMax = 1<<rawMaxShift + rawClassSlack
)

var rawPools [rawMaxShift - rawMinShift + 1]sync.Pool // of *[]byte, one per class

// rawClass returns the smallest class whose buffers hold n bytes, or -1
// when n is beyond the largest.
func rawClass(n int64) int {
	for i := range rawPools {
		if n <= rawClassCap(i) {
			return i
		}
	}
	return -1
}

// rawClassCap is the capacity of the buffers of class i.
func rawClassCap(i int) int64 { return 1<<(rawMinShift+i) + rawClassSlack }

// getRaw returns an empty buffer of capacity at least n: a class's, or
// for n beyond rawPoolMax one made for it.
func getRaw(n int64) []byte {
	i := rawClass(n)
	if i < 0 {
		return make([]byte, 0, n)
	}
	if p, ok := rawPools[i].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, rawClassCap(i))
}

// putRaw gives a buffer back to its class; clear says it held plaintext.
// A buffer of no class (one made beyond rawPoolMax) is dropped.
func putRaw(b []byte, clearIt bool) {
	if clearIt {
		clear(b[:cap(b)])
	}
	i := rawClass(int64(cap(b)))
	if i < 0 || int64(cap(b)) != rawClassCap(i) {
		return
	}
	b = b[:0]
	rawPools[i].Put(&b)
}

// readRaw reads a request body of content type application/octet-stream,
// within the raw body limit, into a raw buffer (getRaw; putRaw gives it back).
// The buffer grows with the bytes received, never ahead of them beyond
// rawStartCap (see there).
func (c *codec) readRaw(r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/octet-stream" {
		return nil, &problemError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", title: "Content-Type must be application/octet-stream"}
	}
	// want is the most the body can need: the announced size (limitBody
	// refused one over the limit), or the limit, plus one byte so that the
	// read that meets EOF (or the 413) needs no growth.
	want := c.maxRaw + 1
	if r.ContentLength >= 0 {
		want = min(r.ContentLength, c.maxRaw) + 1
	}
	buf := getRaw(min(want, rawStartCap))
	for {
		if len(buf) == cap(buf) {
			buf = growRaw(buf, want)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, &problemError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", title: "Request body too large",
					detail: "raw request bodies are limited to " + strconv.FormatInt(c.maxRaw, 10) + " bytes"}
			}
			return nil, badRequest("bad_body", "the request body could not be read")
		}
	}
}

// rawStartCap bounds the buffer readRaw takes before any byte of the body
// has arrived. Allocating the announced Content-Length up front let a few
// slow clients, each announcing 64 MiB and sending little, make the server
// allocate gigabytes; past rawStartCap, memory grows only with bytes
// received.
const rawStartCap = 256 << 10

// growRaw returns a buffer holding buf's bytes with twice its capacity, but
// no more than want while buf is below it (so that a body of the announced
// size ends in the smallest class that holds it, or beyond the classes in
// a buffer of its size, not up to twice that). buf goes back to
// its class, cleared: a raw encrypt body is plaintext. The copies add up to
// less than the final size: for 64 MiB, 8 doublings from rawStartCap.
func growRaw(buf []byte, want int64) []byte {
	n := 2 * int64(cap(buf))
	if int64(cap(buf)) < want {
		n = min(n, want)
	}
	nb := getRaw(n)[:len(buf)]
	copy(nb, buf)
	putRaw(buf, true)
	return nb
}

// rawHeader returns the single value of a request header, "" when absent;
// a header sent twice is refused, and so is one that is not UTF-8.
func rawHeader(r *http.Request, name string) (string, error) {
	vs, err := rawHeaders(r, name)
	if err != nil {
		return "", err
	}
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", badRequest("invalid_request", name+" may be sent once")
}

// rawHeaders returns the lines of a request header. net/http lets any byte
// from 0x80 up through (obs-text); a subject id must be UTF-8 text here as
// in the JSON routes, where checkStrict refuses it, or the two routes would
// not agree on which subject an id names.
func rawHeaders(r *http.Request, name string) ([]string, error) {
	vs := r.Header.Values(name)
	for _, v := range vs {
		if !utf8.ValidString(v) {
			return nil, badRequest("invalid_utf8", name+" is not valid UTF-8")
		}
	}
	return vs, nil
}

// idList splits header lines of ids at commas (a proxy may join repeated
// lines so); ids hold none.
func idList(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, id := range strings.Split(l, ",") {
			out = append(out, strings.TrimSpace(id))
		}
	}
	return out
}

// encryptRaw seals the request body (POST /v1/encrypt/raw) and answers the
// binary envelope, with the artifact id and lineage size in headers.
func (s *sealHandlers) encryptRaw(w http.ResponseWriter, r *http.Request) {
	out, b, err := s.encryptRawCall(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer putRaw(b, false)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set(HeaderArtifact, out.Artifact.String())
	h.Set(HeaderLineageSize, strconv.Itoa(out.Lineage))
	if len(out.Inherited) > 0 {
		h.Set(HeaderInherited, strings.Join(idStrings(out.Inherited), ","))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (s *sealHandlers) encryptRawCall(r *http.Request) (shredd.Sealed, []byte, error) {
	var none shredd.Sealed
	kind, err := rawHeader(r, HeaderKind)
	if err != nil {
		return none, nil, err
	}
	named, err := rawHeader(r, HeaderHolder)
	if err != nil {
		return none, nil, err
	}
	holder, err := actAs(r.Context(), named)
	if err != nil {
		return none, nil, err
	}
	if kind == "" {
		return none, nil, badRequest("missing_field", HeaderKind+" is required")
	}
	var lines [4][]string
	for i, name := range []string{HeaderSubject, HeaderParent, HeaderLease, HeaderIndependentOf} {
		if lines[i], err = rawHeaders(r, name); err != nil {
			return none, nil, err
		}
	}
	var unit, indep string
	if unit, err = rawHeader(r, HeaderUnit); err != nil {
		return none, nil, err
	}
	if indep, err = rawHeader(r, HeaderIndependent); err != nil {
		return none, nil, err
	}
	if indep != "" && indep != "true" && indep != "false" {
		return none, nil, badRequest("invalid_request", HeaderIndependent+" must be true or false")
	}
	src, err := sourceBody{Subjects: lines[0], Parents: idList(lines[1]), Leases: idList(lines[2]), Kind: kind, Holder: holder,
		Unit: unit, Independent: indep == "true", IndependentOf: idList(lines[3])}.source()
	if err != nil {
		return none, nil, err
	}
	ctxB64, err := rawHeader(r, HeaderContext)
	if err != nil {
		return none, nil, err
	}
	aad, err := b64(HeaderContext, ctxB64)
	if err != nil {
		return none, nil, err
	}
	pt, err := s.readRaw(r)
	if err != nil {
		return none, nil, err
	}
	defer putRaw(pt, true)
	src = withReader(r.Context(), src) // after the body: its reads are those made before
	return s.svc.EncryptBinary(r.Context(), src, pt, aad, getRaw(int64(len(pt))+64<<10))
}

// decryptRaw opens the binary envelope of the request body (POST
// /v1/decrypt/raw) and answers the plaintext, with the artifact, kind and
// lease in headers.
func (s *sealHandlers) decryptRaw(w http.ResponseWriter, r *http.Request) {
	named, err := rawHeader(r, HeaderHolder)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	holder, err := actAs(r.Context(), named)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctxB64, err := rawHeader(r, HeaderContext)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	aad, err := b64(HeaderContext, ctxB64)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := s.readRaw(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer putRaw(body, false)
	if len(body) == 0 {
		s.fail(w, r, badRequest("missing_field", "the body must hold a binary envelope"))
		return
	}
	unit, err := rawHeader(r, HeaderUnit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkUnit(HeaderUnit, unit); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.DecryptBinary(r.Context(), body, aad, reader(r.Context(), holder, unit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer clear(out.Plaintext)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(out.Plaintext)))
	h.Set(HeaderArtifact, out.Artifact.String())
	h.Set(HeaderKind, out.Kind)
	h.Set(HeaderLease, out.Lease.ID.String())
	h.Set(HeaderLeaseExpiry, out.Lease.ExpiresAt.UTC().Format(time.RFC3339Nano))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Plaintext)
}
