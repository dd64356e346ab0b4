package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
)

// MetricsContentType is the content type of the Prometheus text exposition
// format, version 0.0.4, that Metrics.Handler serves.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricsLatencyBuckets are the upper bounds, in seconds, of the buckets of
// shredd_http_request_duration_seconds.
var metricsLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Metrics counts HTTP requests and serves them, together with the state of
// the forgets, the key cache, the epochs and the root store, as Prometheus
// metrics (docs/operations.md, "Metrics and logs").
//
// Its labels carry only route patterns, methods, status codes, forget states
// and root store operations: never a subject, an id of an artifact or a
// forget, a token, or a URL as the client sent it.
type Metrics struct {
	svc  shredd.Eraser
	keys *keystore.Store

	// Log receives the errors of scrapes that fail (discarded when nil). Set
	// it before the first scrape.
	Log *slog.Logger

	mu       sync.Mutex
	requests map[requestSeries]uint64
	latency  map[string]*latencyHistogram // by route
}

type requestSeries struct {
	route, method string
	code          int
}

type latencyHistogram struct {
	counts []uint64 // per bucket of metricsLatencyBuckets, then +Inf; not cumulative
	sum    float64
	n      uint64
}

// NewMetrics returns the metrics of a service and its key tree.
func NewMetrics(svc shredd.Eraser, keys *keystore.Store) *Metrics {
	return &Metrics{svc: svc, keys: keys, requests: map[requestSeries]uint64{}, latency: map[string]*latencyHistogram{}}
}

// Middleware counts each request by route pattern, method and status code,
// and observes its latency by route pattern. It is meant to be mounted once,
// on the root chi router, in the root middleware stack (chi wants every Use
// before the first route), before the middlewares that may answer without
// routing, so that their answers count too:
//
//	r := chi.NewRouter()
//	r.Use(s.requestIDs, s.accessLog, m.Middleware, s.recoverer, s.limitBody)
//
// It reads chi's route pattern after the request was routed ("/v1/forgets/{id}",
// never the path the client sent); a request that matched no route, or was
// answered before routing, counts as "unmatched" (or as the pattern of the
// sub-router that refused it, such as "/v1/*"). Methods other than the
// standard ones count as "OTHER", so that clients cannot create series at
// will. A handler that panics before writing a status counts as 500, wherever
// the recoverer sits. A nil *Metrics passes requests through.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		returned := false
		defer func() {
			code := ww.Status()
			switch {
			case code == 0 && !returned:
				code = http.StatusInternalServerError // panicked before writing
			case code == 0:
				code = http.StatusOK // net/http sends 200 for a handler that wrote nothing
			}
			m.observe(metricsRoute(r), metricsMethod(r.Method), code, time.Since(start))
		}()
		next.ServeHTTP(ww, r)
		returned = true
	})
}

// metricsRoute returns the chi route pattern a request matched, or
// "unmatched".
func metricsRoute(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// metricsMethod returns a method label: the standard methods as they are, anything
// else as "OTHER".
func metricsMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

func (m *Metrics) observe(route, method string, code int, d time.Duration) {
	s := d.Seconds()
	i, _ := slices.BinarySearch(metricsLatencyBuckets, s) // first bucket with bound >= s; len for +Inf
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestSeries{route, method, code}]++
	h := m.latency[route]
	if h == nil {
		h = &latencyHistogram{counts: make([]uint64, len(metricsLatencyBuckets)+1)}
		m.latency[route] = h
	}
	h.counts[i]++
	h.sum += s
	h.n++
}

// Handler serves the metrics in the Prometheus text format (version 0.0.4).
// The forget counts come from the registry at scrape time (two indexed count
// queries); everything else is in memory. When the registry cannot be read,
// the scrape fails with 500 and nothing else, so that the failure shows as a
// failed scrape.
//
// It is meant to be mounted on the same router as Middleware, behind the
// authentication of the admin or audit scope: the metrics name no subject,
// but they tell how many forgets there are and how the service is used.
//
//	r.With(s.authenticate, s.require(ScopeAdmin, ScopeAudit)).Get("/metrics", m.Handler().ServeHTTP)
//
// A nil *Metrics serves 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b expoWriter
		if err := m.write(r.Context(), &b); err != nil {
			if m.Log != nil {
				m.Log.LogAttrs(r.Context(), slog.LevelError, "metrics scrape failed", slog.String("request_id", requestID(r.Context())),
					slog.String("error", err.Error()))
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(Problem{Type: "urn:shredd:problem:internal", Title: "Internal error",
				Status: http.StatusInternalServerError, Code: "internal", RequestID: requestID(r.Context())})
			return
		}
		w.Header().Set("Content-Type", MetricsContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		_, _ = w.Write(b.Bytes())
	})
}

// write writes the exposition of every metric to w.
func (m *Metrics) write(ctx context.Context, w *expoWriter) error {
	byState, overdue, err := m.svc.CountForgets(ctx)
	if err != nil {
		return err
	}
	hits, misses := m.keys.CacheStats()
	epochs := m.keys.EpochStats()
	rootErrs := m.keys.RootErrors()

	m.mu.Lock()
	reqs := make([]requestSeries, 0, len(m.requests))
	for k := range m.requests {
		reqs = append(reqs, k)
	}
	counts := make(map[requestSeries]uint64, len(m.requests))
	for k, n := range m.requests {
		counts[k] = n
	}
	routes := make([]string, 0, len(m.latency))
	hists := make(map[string]latencyHistogram, len(m.latency))
	for route, h := range m.latency {
		routes = append(routes, route)
		hists[route] = latencyHistogram{counts: slices.Clone(h.counts), sum: h.sum, n: h.n}
	}
	m.mu.Unlock()

	slices.SortFunc(reqs, func(a, b requestSeries) int {
		if c := strings.Compare(a.route, b.route); c != 0 {
			return c
		}
		if c := strings.Compare(a.method, b.method); c != 0 {
			return c
		}
		return a.code - b.code
	})
	w.family("shredd_http_requests_total", "counter", "HTTP requests served, by chi route pattern, method and status code.")
	for _, k := range reqs {
		w.sample("shredd_http_requests_total", float64(counts[k]), "route", k.route, "method", k.method, "code", strconv.Itoa(k.code))
	}

	slices.Sort(routes)
	w.family("shredd_http_request_duration_seconds", "histogram", "Latency of HTTP requests in seconds, by chi route pattern.")
	for _, route := range routes {
		h := hists[route]
		var cum uint64
		for i, bound := range metricsLatencyBuckets {
			cum += h.counts[i]
			w.sample("shredd_http_request_duration_seconds_bucket", float64(cum), "route", route, "le", expoFloat(bound))
		}
		w.sample("shredd_http_request_duration_seconds_bucket", float64(h.n), "route", route, "le", "+Inf")
		w.sample("shredd_http_request_duration_seconds_sum", h.sum, "route", route)
		w.sample("shredd_http_request_duration_seconds_count", float64(h.n), "route", route)
	}

	states := make([]string, 0, len(byState))
	for st := range byState {
		states = append(states, st)
	}
	slices.Sort(states)
	w.family("shredd_forgets", "gauge", "Forgets in the registry, by state.")
	for _, st := range states {
		w.sample("shredd_forgets", float64(byState[st]), "state", st)
	}
	w.family("shredd_forgets_overdue", "gauge", "Forgets not shredded by their deadline.")
	w.sample("shredd_forgets_overdue", float64(overdue))

	w.family("shredd_key_cache_hits_total", "counter", "Subject key lookups answered from the in-memory cache.")
	w.sample("shredd_key_cache_hits_total", float64(hits))
	w.family("shredd_key_cache_misses_total", "counter", "Subject key lookups that went to the database and the root store.")
	w.sample("shredd_key_cache_misses_total", float64(misses))

	w.family("shredd_epochs_total", "counter", "Root epochs completed by this process.")
	w.sample("shredd_epochs_total", float64(epochs.Completed))
	w.family("shredd_epoch_failures_total", "counter", "Root epoch runs that failed and will be resumed.")
	w.sample("shredd_epoch_failures_total", float64(epochs.Failed))
	w.family("shredd_epoch_duration_seconds", "gauge", "Duration in seconds of the last root epoch this process completed (0 before the first).")
	w.sample("shredd_epoch_duration_seconds", epochs.Last.Seconds())

	ops := make([]string, 0, len(rootErrs))
	for op := range rootErrs {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	w.family("shredd_root_store_errors_total", "counter", "Root store calls that failed because the backend was unavailable, by operation.")
	for _, op := range ops {
		w.sample("shredd_root_store_errors_total", float64(rootErrs[op]), "op", op)
	}
	return nil
}

// expoWriter builds an exposition in the text format.
type expoWriter struct{ bytes.Buffer }

// family writes the HELP and TYPE lines of a metric.
func (w *expoWriter) family(name, typ, help string) {
	help = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help)
	w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// expoLabelEscaper escapes a label value of the text format.
var expoLabelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// sample writes one sample line; labels are name, value pairs.
func (w *expoWriter) sample(name string, v float64, labels ...string) {
	w.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			w.WriteByte('{')
		} else {
			w.WriteByte(',')
		}
		w.WriteString(labels[i] + `="` + expoLabelEscaper.Replace(labels[i+1]) + `"`)
	}
	if len(labels) > 0 {
		w.WriteByte('}')
	}
	w.WriteString(" " + expoFloat(v) + "\n")
}

// expoFloat formats a sample value or bucket bound as the text format
// wants it.
func expoFloat(v float64) string {
	switch {
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatFloat(v, 'f', -1, 64) // counts as integers, not 1.234567e+06
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
