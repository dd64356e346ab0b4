package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/shredd/shredd"
)

// MetricsContentType is the content type of the Prometheus text exposition
// format, version 0.0.4, that Metrics.Handler serves.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricsLatencyBuckets are the upper bounds, in seconds, of the buckets of
// shredd_http_request_duration_seconds.
var metricsLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Metrics counts HTTP requests and serves them, together with the state of
// the forgets, the key cache, the epochs and the root store, the build
// (shredd_build_info), and the Go runtime's and the process's metrics, as
// Prometheus metrics (docs/operations.md, "Metrics and logs").
//
// The exposition is written by hand, and the runtime and process metrics
// carry the names of prometheus/client_golang's Go and process collectors:
// the same dashboards work, and the key service does not link that module
// and the five it pulls in (docs/operations.md says why).
//
// Its labels carry only route patterns, methods, status codes, forget states
// and root store operations: never a subject, an id of an artifact or a
// forget, a token, or a URL as the client sent it.
type Metrics struct {
	svc  shredd.Eraser
	keys KeyStats

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

// KeyStats is what GET /metrics reads of the key tree: the counters of its
// key cache, of the root epochs this process ran, and of the root store
// calls that failed.
type KeyStats interface {
	// Cache returns the subject key lookups answered from the cache
	// and those that went to the database and the root store.
	Cache() (hits, misses uint64)
	// EpochCounts returns the root epochs completed and failed since the
	// process started, and the wall time of the last completed one (0
	// before the first).
	EpochCounts() (completed, failed uint64, last time.Duration)
	// RootErrors returns the root store calls that failed because the
	// backend was unavailable, by operation.
	RootErrors() map[string]uint64
}

// NewMetrics returns the metrics of a service and its key tree.
func NewMetrics(svc shredd.Eraser, keys KeyStats) *Metrics {
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
	hits, misses := m.keys.Cache()
	epochsDone, epochsFailed, epochLast := m.keys.EpochCounts()
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

	w.family("shredd_forgets", "gauge", "Forgets in the registry, by state.")
	for _, st := range slices.Sorted(maps.Keys(byState)) {
		w.sample("shredd_forgets", float64(byState[st]), "state", st)
	}
	w.family("shredd_forgets_overdue", "gauge", "Forgets not shredded by their deadline.")
	w.sample("shredd_forgets_overdue", float64(overdue))

	w.family("shredd_key_cache_hits_total", "counter", "Subject key lookups answered from the in-memory cache.")
	w.sample("shredd_key_cache_hits_total", float64(hits))
	w.family("shredd_key_cache_misses_total", "counter", "Subject key lookups that went to the database and the root store.")
	w.sample("shredd_key_cache_misses_total", float64(misses))

	w.family("shredd_epochs_total", "counter", "Root epochs completed by this process.")
	w.sample("shredd_epochs_total", float64(epochsDone))
	w.family("shredd_epoch_failures_total", "counter", "Root epoch runs that failed and will be resumed.")
	w.sample("shredd_epoch_failures_total", float64(epochsFailed))
	w.family("shredd_epoch_duration_seconds", "gauge", "Duration in seconds of the last root epoch this process completed (0 before the first).")
	w.sample("shredd_epoch_duration_seconds", epochLast.Seconds())

	w.family("shredd_root_store_errors_total", "counter", "Root store calls that failed because the backend was unavailable, by operation.")
	for _, op := range slices.Sorted(maps.Keys(rootErrs)) {
		w.sample("shredd_root_store_errors_total", float64(rootErrs[op]), "op", op)
	}

	b := ReadBuildInfo()
	w.family("shredd_build_info", "gauge", "The build of the running binary: always 1, with its version, commit and Go version as labels.")
	w.sample("shredd_build_info", 1, "version", b.Version, "commit", b.Commit, "modified", strconv.FormatBool(b.Modified), "goversion", b.GoVersion)
	writeGoMetrics(w)
	writeProcessMetrics(w)
	return nil
}

// Release is the version a binary reports when its build info carries none
// (a go build in a checkout reports "(devel)"). Set it at link time:
// go build -ldflags "-X github.com/shredd/shredd/api.Release=v1.2.3".
var Release = "0.1.0-dev"

// BuildInfo describes the running binary.
type BuildInfo struct {
	// Version is the module version the go command stamped (a release tag
	// for go install ...@v1.2.3; a pseudo-version when built from a VCS
	// checkout with -buildvcs), else Release.
	Version string
	// Commit is the VCS revision the binary was built from, "unknown" when
	// the build recorded none (go build -buildvcs=false, go test, or no VCS
	// checkout).
	Commit string
	// Modified reports uncommitted changes in the checkout it was built from.
	Modified bool
	// CommitTime is the revision's commit time (RFC 3339), "" when unknown.
	CommitTime string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// ReadBuildInfo returns the running binary's build, from the build info the
// go command embeds (runtime/debug.ReadBuildInfo).
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: Release, Commit: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.CommitTime = s.Value
		}
	}
	return b
}

// writeGoMetrics writes the Go runtime's metrics under the names of
// prometheus/client_golang's Go collector (go_goroutines, go_memstats_...,
// go_gc_duration_seconds), so that the usual dashboards work, without that
// module and its dependencies: see docs/operations.md.
func writeGoMetrics(w *expoWriter) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.family("go_info", "gauge", "Information about the Go environment.")
	w.sample("go_info", 1, "version", runtime.Version())
	w.family("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	w.sample("go_goroutines", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	w.family("go_threads", "gauge", "Number of OS threads created.")
	w.sample("go_threads", float64(threads))

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	w.family("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		w.sample("go_gc_duration_seconds", gc.PauseQuantiles[i].Seconds(), "quantile", q)
	}
	w.sample("go_gc_duration_seconds_sum", gc.PauseTotal.Seconds())
	w.sample("go_gc_duration_seconds_count", float64(gc.NumGC))

	for _, m := range []struct {
		name, typ, help string
		v               uint64
	}{
		{"go_memstats_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", ms.Alloc},
		{"go_memstats_alloc_bytes_total", "counter", "Total number of heap bytes allocated, even if freed.", ms.TotalAlloc},
		{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from the system.", ms.Sys},
		{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated.", ms.Mallocs},
		{"go_memstats_frees_total", "counter", "Total number of heap objects frees.", ms.Frees},
		{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", ms.HeapAlloc},
		{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from the system.", ms.HeapSys},
		{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used.", ms.HeapIdle},
		{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", ms.HeapInuse},
		{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to the OS.", ms.HeapReleased},
		{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", ms.HeapObjects},
		{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from the system for stack allocator.", ms.StackInuse},
		{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from the system for stack allocator.", ms.StackSys},
		{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata.", ms.GCSys},
		{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when the next garbage collection will take place.", ms.NextGC},
	} {
		w.family(m.name, m.typ, m.help)
		w.sample(m.name, float64(m.v))
	}
	w.family("go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.")
	w.sample("go_memstats_last_gc_time_seconds", float64(ms.LastGC)/1e9)
	w.family("go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting.")
	w.sample("go_sched_gomaxprocs_threads", float64(runtime.GOMAXPROCS(0)))
}

// processStart is when this process started, for process_start_time_seconds
// where /proc cannot tell.
var processStart = time.Now()

// writeProcessMetrics writes the process's metrics under the names of
// prometheus/client_golang's process collector. CPU time, memory and the
// start time come from /proc/self (Linux); elsewhere only what the
// standard library knows (open file limit, start time) is written.
func writeProcessMetrics(w *expoWriter) {
	start := float64(processStart.UnixNano()) / 1e9
	if st, ok := readProcStat(); ok {
		w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		w.sample("process_cpu_seconds_total", st.cpuSeconds)
		w.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
		w.sample("process_virtual_memory_bytes", st.virtual)
		w.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		w.sample("process_resident_memory_bytes", st.resident)
		if st.start > 0 {
			start = st.start
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		w.family("process_open_fds", "gauge", "Number of open file descriptors.")
		w.sample("process_open_fds", float64(len(ents)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		w.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
		w.sample("process_max_fds", float64(lim.Cur))
	}
	w.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
	w.sample("process_start_time_seconds", start)
}

// procStat is what writeProcessMetrics reads from /proc/self/stat.
type procStat struct {
	cpuSeconds, virtual, resident, start float64
}

// userHZ is the unit of the times in /proc/self/stat: USER_HZ, 100 on every
// Linux architecture the kernel exposes to user space (what procfs, the
// library of client_golang, assumes too).
const userHZ = 100

// readProcStat reads /proc/self/stat (and the boot time of /proc/stat for
// the start time); ok is false where there is no /proc.
func readProcStat() (procStat, bool) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(n int) float64 {
		v, _ := strconv.ParseUint(f[n-3], 10, 64)
		return float64(v)
	}
	st := procStat{
		cpuSeconds: (num(14) + num(15)) / userHZ,
		virtual:    num(23),
		resident:   num(24) * float64(os.Getpagesize()),
	}
	if s, err := os.ReadFile("/proc/stat"); err == nil {
		for line := range strings.Lines(string(s)) {
			if v, ok := strings.CutPrefix(line, "btime "); ok {
				if boot, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
					st.start = float64(boot) + num(22)/userHZ
				}
			}
		}
	}
	return st, true
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
