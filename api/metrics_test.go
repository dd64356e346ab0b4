package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/sealing"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// testClock is a clock the tests move forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// metricsEnv is a real service over SQLite behind the real API, with the
// metrics mounted the way the lead wires them: the middleware at the root,
// /metrics next to the API.
type metricsEnv struct {
	*env
	m     *api.Metrics
	keys  *keystore.Tree
	clock *testClock
}

// newMetricsEnv builds the service and the API on root (a local root file
// when nil); the registry's clock is the test clock, the key tree's the
// real one.
func newMetricsEnv(t *testing.T, root keystore.RootStore, ko keystore.Options) *metricsEnv {
	t.Helper()
	clock := &testClock{}
	st := shreddtest.New(t, shreddtest.Options{Root: root, Keystore: ko, Registry: registry.Options{Now: clock.Now}, Sealer: sealing.Options{Now: clock.Now}, Erasure: erasure.Options{Now: clock.Now}, AdminToken: token})
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	m := api.NewMetrics(st.Service, stackKeys(st))
	m.Log = log
	r := chi.NewRouter()
	r.Use(m.Middleware)
	r.Get("/metrics", m.Handler().ServeHTTP)
	r.Mount("/", api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Log: log, Tokens: st.Tokens}).Handler())
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &metricsEnv{env: &env{t: t, srv: srv, log: &logs, hasher: st.Hasher}, m: m, keys: st.Keys, clock: clock}
}

// scrape fetches /metrics and parses it strictly.
func (e *metricsEnv) scrape() (*exposition, string) {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.MetricsContentType {
		e.t.Fatalf("GET /metrics: %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	x, err := parseExposition(string(b))
	if err != nil {
		e.t.Fatalf("the exposition does not parse: %v\n%s", err, b)
	}
	return x, string(b)
}

// hang bounds a wait on a state: long enough that only a hang reaches it,
// even on a loaded machine. A bound on a wait, never a timing assertion.
const hang = 3 * time.Minute

// settled scrapes the handler directly (a scrape that does not count
// itself) until done holds (at most hang). The middleware counts a request
// when its handler returns, and a client that has read a large response
// (a scrape) may see it before that.
func (e *metricsEnv) settled(done func(*exposition) bool) *exposition {
	e.t.Helper()
	deadline := time.Now().Add(hang)
	for {
		rec := httptest.NewRecorder()
		e.m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		x, err := parseExposition(rec.Body.String())
		if err != nil {
			e.t.Fatalf("the exposition does not parse: %v\n%s", err, rec.Body)
		}
		if done(x) || time.Now().After(deadline) {
			return x
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMetrics(t *testing.T) {
	e := newMetricsEnv(t, nil, keystore.Options{})
	const subject, other = "metrics-alice@example.com", "metrics-bob@example.com"
	const plaintext, plaintext2 = "metrics-plaintext-oolong-7731", "metrics-plaintext-sencha-2208"
	if r := e.do("PUT", "/v1/kinds/episodic", ""); r.status != 201 {
		t.Fatalf("put kind: %d %v", r.status, r.body)
	}
	enc := func(subj, pt string) (string, string) {
		r := e.do("POST", "/v1/encrypt", `{"subject":"`+subj+`","kind":"episodic","plaintext":"`+b64(pt)+`","context":"`+b64("ctx-1")+`"}`)
		if r.status != 200 {
			t.Fatalf("encrypt: %d %v", r.status, r.body)
		}
		return str(r, "artifact"), str(r, "ciphertext")
	}
	art1, ct1 := enc(subject, plaintext)
	art2, ct2 := enc(subject, plaintext2) // the subject key comes from the cache
	art3, ct3 := enc(other, plaintext2)
	decrypt := func(ct, ctx string, want int) {
		t.Helper()
		if r := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`","context":"`+b64(ctx)+`"}`); r.status != want {
			t.Fatalf("decrypt: %d, want %d: %v", r.status, want, r.body)
		}
	}
	decrypt(ct1, "ctx-1", 200)
	decrypt(ct1, "ctx-2", 422)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/artifacts/" + art1, 200},
		{"GET", "/v1/artifacts/" + art2, 200},
		{"GET", "/v1/artifacts/00000000000000000000000000000000", 404},
		{"GET", "/v1/nope/" + art3, 404},
		{"BREW", "/v1/kinds", 405},
	} {
		if r := e.do(c.method, c.path, ""); r.status != c.want {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, r.status, c.want)
		}
	}
	f := e.do("POST", "/v1/forget", `{"subject":"`+subject+`"}`)
	if f.status != 202 {
		t.Fatalf("forget: %d %v", f.status, f.body)
	}
	fid := str(f, "forget")
	decrypt(ct1, "ctx-1", 410)
	decrypt(ct2, "ctx-1", 410)
	if r := e.do("GET", "/v1/forgets/"+fid, ""); r.status != 200 {
		t.Fatalf("get forget: %d", r.status)
	}

	x, _ := e.scrape()
	x.want(t, 1, "shredd_forgets", "state", "committed")
	x.want(t, 0, "shredd_forgets", "state", "requested")
	x.want(t, 0, "shredd_forgets", "state", "shredded")
	x.want(t, 0, "shredd_forgets_overdue")
	x.want(t, 0, "shredd_epochs_total")

	e.clock.Advance(erasure.DefaultDeadline + time.Hour)
	x, _ = e.scrape()
	x.want(t, 1, "shredd_forgets_overdue")

	if r := e.do("POST", "/v1/epoch", ""); r.status != 200 {
		t.Fatalf("epoch: %d %v", r.status, r.body)
	}
	_, text := e.scrape()
	x = e.settled(func(x *exposition) bool {
		s, _ := x.find("shredd_http_requests_total", "route", "/metrics", "method", "GET", "code", "200")
		return s.value == 3
	})
	x.want(t, 0, "shredd_forgets", "state", "committed")
	x.want(t, 1, "shredd_forgets", "state", "shredded")
	x.want(t, 0, "shredd_forgets", "state", "erased")
	// Shredded is not erased: past its deadline, the forget stays overdue
	// until every condition of erasure is proven.
	x.want(t, 1, "shredd_forgets_overdue")
	x.want(t, 1, "shredd_epochs_total")
	x.want(t, 0, "shredd_epoch_failures_total")
	if d := x.value(t, "shredd_epoch_duration_seconds"); d < 0 {
		t.Errorf("epoch duration %v", d)
	}
	for _, op := range []string{"wrap", "unwrap", "rewrap", "rotate", "trim", "versions"} {
		x.want(t, 0, "shredd_root_store_errors_total", "op", op)
	}
	if x.has("shredd_root_store_errors_total", "op", "subject_decrypt") {
		t.Errorf("subject KMS operations counted in tree mode")
	}

	// Requests, by route pattern, method and code.
	for _, c := range []struct {
		route, method, code string
		n                   float64
	}{
		{"/v1/kinds/{kind}", "PUT", "201", 1},
		{"/v1/encrypt", "POST", "200", 3},
		{"/v1/decrypt", "POST", "200", 1},
		{"/v1/decrypt", "POST", "422", 1},
		{"/v1/decrypt", "POST", "410", 2},
		{"/v1/artifacts/{id}", "GET", "200", 2},
		{"/v1/artifacts/{id}", "GET", "404", 1},
		{"/v1/*", "GET", "404", 1},
		{"/v1/forget", "POST", "202", 1},
		{"/v1/forgets/{id}", "GET", "200", 1},
		{"/v1/epoch", "POST", "200", 1},
		{"/metrics", "GET", "200", 3},
	} {
		x.want(t, c.n, "shredd_http_requests_total", "route", c.route, "method", c.method, "code", c.code)
	}
	if !x.hasLabel("shredd_http_requests_total", "method", "OTHER") {
		t.Errorf("the BREW request is not counted as method OTHER")
	}
	// The latency histogram of a route counts every request of the route.
	for _, route := range x.labelValues("shredd_http_requests_total", "route") {
		var n float64
		for _, s := range x.samples {
			if s.name == "shredd_http_requests_total" && s.labels["route"] == route {
				n += s.value
			}
		}
		x.want(t, n, "shredd_http_request_duration_seconds_count", "route", route)
	}

	hits, misses := keystore.NewStats(e.keys).Cache()
	if hits < 2 {
		t.Errorf("key cache hits %d, want at least 2 (the second encrypt and the decrypt)", hits)
	}
	x.want(t, float64(hits), "shredd_key_cache_hits_total")
	x.want(t, float64(misses), "shredd_key_cache_misses_total")

	// Labels carry route patterns only; nothing of the data reaches the
	// exposition.
	routeRe := regexp.MustCompile(`^(/[A-Za-z0-9_.{}*/-]*|unmatched)$`)
	for _, route := range x.labelValues("shredd_http_request_duration_seconds_count", "route") {
		if !routeRe.MatchString(route) {
			t.Errorf("route label %q is not a route pattern", route)
		}
	}
	hexRun := regexp.MustCompile(`[0-9a-fA-F]{32}`) // ids and sids; numbers are shorter
	// (The commit of shredd_build_info is a hex run too, by design; a test
	// binary has none, but skip its line all the same.)
	withoutBuild := regexp.MustCompile(`(?m)^shredd_build_info\{.*$`).ReplaceAllString(text, "")
	if m := hexRun.FindString(withoutBuild); m != "" {
		t.Errorf("the exposition holds a hex run %q (an id or a sid?)", m)
	}
	secrets := []string{subject, other, "alice", plaintext, plaintext2, b64(plaintext), b64(plaintext2), b64("ctx-1"),
		ct1, ct2, ct3, art1, art2, art3, fid, token, "BREW", "nope"}
	for _, subj := range []string{subject, other} {
		sid := e.hasher.SID(subj)
		secrets = append(secrets, hex.EncodeToString(sid[:]), strings.ToUpper(hex.EncodeToString(sid[:4])))
	}
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("the exposition holds %q:\n%s", s, text)
		}
	}
}

// TestMetricsBuildRuntimeProcess: shredd_build_info with the version and
// commit of api.ReadBuildInfo, and the Go runtime and process metrics under
// the names of prometheus/client_golang's collectors, with values that
// agree with what the process itself can tell.
func TestMetricsBuildRuntimeProcess(t *testing.T) {
	e := newMetricsEnv(t, nil, keystore.Options{})
	b := api.ReadBuildInfo()
	// A test binary has no module version nor VCS stamp: the fallbacks.
	if b.Version != api.Release || b.Commit != "unknown" || b.GoVersion != runtime.Version() {
		t.Fatalf("ReadBuildInfo in a test binary: %+v", b)
	}
	runtime.GC() // at least one collection for the GC summary
	x, _ := e.scrape()
	x.want(t, 1, "shredd_build_info", "version", b.Version, "commit", b.Commit, "modified", "false", "goversion", runtime.Version())
	x.want(t, 1, "go_info", "version", runtime.Version())
	if x.types["go_gc_duration_seconds"] != "summary" {
		t.Fatalf("go_gc_duration_seconds is a %q", x.types["go_gc_duration_seconds"])
	}
	if n := x.value(t, "go_gc_duration_seconds_count"); n < 1 {
		t.Errorf("go_gc_duration_seconds_count %v after a runtime.GC", n)
	}
	prev := -1.0
	for _, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		v := x.value(t, "go_gc_duration_seconds", "quantile", q)
		if v < prev {
			t.Errorf("GC pause quantile %s = %v below the one before (%v)", q, v, prev)
		}
		prev = v
	}
	if g := x.value(t, "go_goroutines"); g < 2 || g > 10000 {
		t.Errorf("go_goroutines %v", g)
	}
	for _, name := range []string{"go_threads", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total", "go_memstats_sys_bytes",
		"go_memstats_mallocs_total", "go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_heap_objects",
		"go_memstats_next_gc_bytes", "go_memstats_last_gc_time_seconds", "process_open_fds", "process_max_fds"} {
		if v := x.value(t, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	x.want(t, float64(runtime.GOMAXPROCS(0)), "go_sched_gomaxprocs_threads")
	if x.value(t, "go_memstats_alloc_bytes_total") < x.value(t, "go_memstats_alloc_bytes") {
		t.Error("go_memstats_alloc_bytes_total below go_memstats_alloc_bytes")
	}
	if last := x.value(t, "go_memstats_last_gc_time_seconds"); math.Abs(last-float64(time.Now().Unix())) > 3600 {
		t.Errorf("go_memstats_last_gc_time_seconds %v is not about now", last)
	}
	if runtime.GOOS != "linux" {
		t.Fatalf("the process metrics are read from /proc: this test expects Linux, not %s", runtime.GOOS)
	}
	// The test process's own view: its start (it started less than an hour
	// ago, and before now), its memory, its CPU time, its descriptors.
	start := x.value(t, "process_start_time_seconds")
	if now := float64(time.Now().UnixNano()) / 1e9; start > now || now-start > 3600 {
		t.Errorf("process_start_time_seconds %v, now %v", start, now)
	}
	if rss := x.value(t, "process_resident_memory_bytes"); rss < 1<<20 || rss > x.value(t, "process_virtual_memory_bytes") {
		t.Errorf("process_resident_memory_bytes %v (virtual %v)", rss, x.value(t, "process_virtual_memory_bytes"))
	}
	// The CPU counter, against the process's own rusage read just before
	// and just after a second scrape: no busy wait and no clock, so no
	// outcome that depends on the machine's load or speed. /proc/self/stat
	// and getrusage read the same kernel counters; the former truncates
	// user and system time to clock ticks (1/userHZ s each), hence the
	// slack below the bracket.
	self := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	cpu := x.value(t, "process_cpu_seconds_total")
	before := self()
	x2, _ := e.scrape()
	after := self()
	cpu2 := x2.value(t, "process_cpu_seconds_total")
	if x2.types["process_cpu_seconds_total"] != "counter" || cpu < 0 || cpu2 < cpu {
		t.Errorf("process_cpu_seconds_total (a %q) went %v -> %v: want a counter, non-negative and never falling",
			x2.types["process_cpu_seconds_total"], cpu, cpu2)
	}
	const ticks = 2.0 / 100 // user and system time, each truncated to a tick
	if cpu2 < before-ticks || cpu2 > after {
		t.Errorf("process_cpu_seconds_total %v, while the process's own rusage read %v s before the scrape and %v s after", cpu2, before, after)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if fds := x2.value(t, "process_open_fds"); math.Abs(fds-float64(len(ents))) > 10 {
		t.Errorf("process_open_fds %v, /proc/self/fd lists %d", fds, len(ents))
	}
}

// TestMetricsRootStoreErrors stops the Vault of the root store: requests and
// epochs fail closed, and the failed root store calls are counted.
func TestMetricsRootStoreErrors(t *testing.T) {
	srv := vaulttest.Dev(t)
	root, err := vault.Open(context.Background(), vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: "shredd-metrics"})
	if err != nil {
		t.Fatal(err)
	}
	e := newMetricsEnv(t, root, keystore.Options{CacheTTL: time.Nanosecond})
	if r := e.do("PUT", "/v1/kinds/episodic", ""); r.status != 201 {
		t.Fatalf("put kind: %d %v", r.status, r.body)
	}
	body := `{"subject":"vault-subject","kind":"episodic","plaintext":"` + b64("x") + `"}`
	if r := e.do("POST", "/v1/encrypt", body); r.status != 200 {
		t.Fatalf("encrypt: %d %v", r.status, r.body)
	}
	x, _ := e.scrape()
	x.want(t, 0, "shredd_root_store_errors_total", "op", "unwrap")

	srv.Stop()
	if r := e.do("POST", "/v1/encrypt", body); r.status != 503 {
		t.Fatalf("encrypt with Vault stopped: %d %v, want 503", r.status, r.body)
	}
	if r := e.do("POST", "/v1/epoch", ""); r.status != 503 {
		t.Fatalf("epoch with Vault stopped: %d %v, want 503", r.status, r.body)
	}
	x, _ = e.scrape() // no root store call: the scrape works with Vault down
	if n := x.value(t, "shredd_root_store_errors_total", "op", "unwrap"); n < 1 {
		t.Errorf("unwrap errors %v after a failed encrypt, want >= 1", n)
	}
	if n := x.value(t, "shredd_root_store_errors_total", "op", "versions"); n < 1 {
		t.Errorf("versions errors %v after a failed epoch, want >= 1", n)
	}
	x.want(t, 1, "shredd_epoch_failures_total")
	x.want(t, 0, "shredd_epochs_total")
	x.want(t, 1, "shredd_http_requests_total", "route", "/v1/encrypt", "method", "POST", "code", "503")
	x.want(t, 1, "shredd_http_requests_total", "route", "/v1/epoch", "method", "POST", "code", "503")
}

// TestMetricsMiddleware checks the middleware on a router of its own:
// patterns, not paths; unmatched routes; methods outside the standard set;
// handlers that write nothing or panic, with the recoverer outside or inside.
func TestMetricsMiddleware(t *testing.T) {
	recoverer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					w.WriteHeader(http.StatusInternalServerError)
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
	for _, order := range []string{"recoverer outside", "recoverer inside"} {
		t.Run(order, func(t *testing.T) {
			st := shreddtest.New(t, shreddtest.Options{})
			m := api.NewMetrics(st.Service, stackKeys(st))
			r := chi.NewRouter()
			if order == "recoverer outside" {
				r.Use(recoverer, m.Middleware)
			} else {
				r.Use(m.Middleware, recoverer)
			}
			r.Get("/metrics", m.Handler().ServeHTTP)
			r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
			r.Get("/silent", func(w http.ResponseWriter, r *http.Request) {})
			r.Get("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
			r.Route("/sub", func(r chi.Router) {
				r.Post("/{x}/leaf", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
			})
			srv := httptest.NewServer(r)
			defer srv.Close()
			for _, c := range []struct{ method, path string }{
				{"GET", "/items/secret-one"}, {"GET", "/items/secret-two"}, {"GET", "/silent"}, {"GET", "/panic"},
				{"POST", "/sub/secret-three/leaf"}, {"GET", "/secret-nowhere"}, {"PROPFIND", "/items/secret-four"},
			} {
				req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			resp, err := http.Get(srv.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			x, err := parseExposition(string(b))
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			x.want(t, 2, "shredd_http_requests_total", "route", "/items/{id}", "method", "GET", "code", "200")
			x.want(t, 1, "shredd_http_requests_total", "route", "/silent", "method", "GET", "code", "200")
			x.want(t, 1, "shredd_http_requests_total", "route", "/panic", "method", "GET", "code", "500")
			x.want(t, 1, "shredd_http_requests_total", "route", "/sub/{x}/leaf", "method", "POST", "code", "418")
			x.want(t, 1, "shredd_http_requests_total", "route", "unmatched", "method", "GET", "code", "404")
			// chi refuses a method outside its set before routing.
			x.want(t, 1, "shredd_http_requests_total", "route", "unmatched", "method", "OTHER", "code", "405")
			x.want(t, 2, "shredd_http_request_duration_seconds_count", "route", "/items/{id}")
			if strings.Contains(string(b), "secret") || strings.Contains(string(b), "PROPFIND") {
				t.Fatalf("the exposition holds a path or a method as sent:\n%s", b)
			}
		})
	}
	var nilMetrics *api.Metrics
	h := nilMetrics.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 204 {
		t.Fatalf("nil Metrics middleware: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	nilMetrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 404 {
		t.Fatalf("nil Metrics handler: %d", rec.Code)
	}
}

// TestMetricsScrapeFails closes the database under the metrics: the scrape
// fails as a whole with a 500 problem, and the cause goes to the log.
func TestMetricsScrapeFails(t *testing.T) {
	st := shreddtest.New(t, shreddtest.Options{})
	m := api.NewMetrics(st.Service, stackKeys(st))
	var logs bytes.Buffer
	m.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	st.DB.Close()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(rec.Body.String(), `"code":"internal"`) || strings.Contains(rec.Body.String(), "shredd_") {
		t.Fatalf("scrape of a closed database: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if !strings.Contains(logs.String(), `"msg":"metrics scrape failed"`) || !strings.Contains(logs.String(), "closed") {
		t.Fatalf("the failed scrape is not logged with its cause: %s", logs.String())
	}
}

// TestMetricsConcurrent scrapes while requests run (for the race detector)
// and checks every scrape is consistent and the final counts are exact.
func TestMetricsConcurrent(t *testing.T) {
	e := newMetricsEnv(t, nil, keystore.Options{})
	if r := e.do("PUT", "/v1/kinds/episodic", ""); r.status != 201 {
		t.Fatalf("put kind: %d", r.status)
	}
	const workers, each = 8, 10
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var scrapes atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(e.srv.URL + "/metrics")
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if _, err := parseExposition(string(b)); err != nil {
					t.Errorf("a scrape during requests does not parse: %v", err)
					return
				}
				scrapes.Add(1)
			}
		}()
	}
	var work sync.WaitGroup
	for w := range workers {
		work.Add(1)
		go func() {
			defer work.Done()
			for i := range each {
				body := fmt.Sprintf(`{"subject":"w%d-%d","kind":"episodic","plaintext":"%s"}`, w, i%3, b64("x"))
				req, _ := http.NewRequest("POST", e.srv.URL+"/v1/encrypt", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("encrypt: %d", resp.StatusCode)
				}
			}
		}()
	}
	work.Wait()
	close(stop)
	wg.Wait()
	x := e.settled(func(x *exposition) bool {
		s, _ := x.find("shredd_http_requests_total", "route", "/metrics", "method", "GET", "code", "200")
		return s.value == float64(scrapes.Load())
	})
	x.want(t, workers*each, "shredd_http_requests_total", "route", "/v1/encrypt", "method", "POST", "code", "200")
	x.want(t, workers*each, "shredd_http_request_duration_seconds_count", "route", "/v1/encrypt")
	x.want(t, float64(scrapes.Load()), "shredd_http_requests_total", "route", "/metrics", "method", "GET", "code", "200")
}

// TestExpositionParser checks that the test's parser refuses what the format
// (or shredd's use of it) does not allow, so that the checks above mean
// something.
func TestExpositionParser(t *testing.T) {
	const head = "# HELP h_seconds Latency.\n# TYPE h_seconds histogram\n"
	good := head + `h_seconds_bucket{route="/a",le="0.1"} 1` + "\n" + `h_seconds_bucket{route="/a",le="+Inf"} 2` + "\n" +
		`h_seconds_sum{route="/a"} 0.3` + "\n" + `h_seconds_count{route="/a"} 2` + "\n"
	if _, err := parseExposition(good); err != nil {
		t.Fatalf("good exposition refused: %v", err)
	}
	for name, bad := range map[string]string{
		"no trailing newline":    strings.TrimSuffix(good, "\n"),
		"sample before TYPE":     "c_total 1\n",
		"TYPE without HELP":      "# TYPE c_total counter\nc_total 1\n",
		"unknown type":           "# HELP c_total x\n# TYPE c_total thing\nc_total 1\n",
		"counter without _total": "# HELP c x\n# TYPE c counter\nc 1\n",
		"other family's sample":  "# HELP c_total x\n# TYPE c_total counter\nd_total 1\n",
		"negative counter":       "# HELP c_total x\n# TYPE c_total counter\nc_total -1\n",
		"bad value":              "# HELP g x\n# TYPE g gauge\ng one\n",
		"timestamp":              "# HELP g x\n# TYPE g gauge\ng 1 1700000000\n",
		"unquoted label":         "# HELP g x\n# TYPE g gauge\ng{a=b} 1\n",
		"bad escape":             "# HELP g x\n# TYPE g gauge\n" + `g{a="\t"} 1` + "\n",
		"bad label name":         "# HELP g x\n# TYPE g gauge\n" + `g{1a="x"} 1` + "\n",
		"duplicate label":        "# HELP g x\n# TYPE g gauge\n" + `g{a="x",a="y"} 1` + "\n",
		"duplicate series":       "# HELP g x\n# TYPE g gauge\n" + `g{a="x"} 1` + "\n" + `g{a="x"} 2` + "\n",
		"family repeated":        "# HELP g x\n# TYPE g gauge\ng 1\n# HELP g x\n# TYPE g gauge\n",
		"trailing comma":         "# HELP g x\n# TYPE g gauge\n" + `g{a="x",} 1` + "\n",
		"buckets decrease": head + `h_seconds_bucket{le="0.1"} 2` + "\n" + `h_seconds_bucket{le="+Inf"} 1` + "\n" +
			"h_seconds_sum 1\nh_seconds_count 1\n",
		"bounds decrease": head + `h_seconds_bucket{le="1"} 1` + "\n" + `h_seconds_bucket{le="0.1"} 1` + "\n" +
			`h_seconds_bucket{le="+Inf"} 1` + "\nh_seconds_sum 1\nh_seconds_count 1\n",
		"+Inf is not count": head + `h_seconds_bucket{le="+Inf"} 2` + "\nh_seconds_sum 1\nh_seconds_count 3\n",
		"no +Inf bucket":    head + `h_seconds_bucket{le="1"} 2` + "\nh_seconds_sum 1\nh_seconds_count 2\n",
		"no count":          head + `h_seconds_bucket{le="+Inf"} 2` + "\nh_seconds_sum 1\n",
		"bucket without le": head + `h_seconds_bucket{route="/a"} 2` + "\n",
		"le outside bucket": "# HELP g x\n# TYPE g gauge\n" + `g{le="1"} 1` + "\n",
	} {
		if _, err := parseExposition(bad); err == nil {
			t.Errorf("%s: accepted:\n%s", name, bad)
		}
	}
}

// exposition is a parsed Prometheus text exposition.
type exposition struct {
	types   map[string]string // family name → type
	samples []expoSample
}

type expoSample struct {
	family, name string
	labels       map[string]string
	value        float64
}

var (
	metricNameRe = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRe  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition parses the subset of the text format (version 0.0.4) that
// shredd emits, strictly: every family has a HELP line, then a TYPE line
// (counter, gauge, histogram or summary), then its samples, and appears once;
// counters end in _total and are never negative; label values use only the
// escapes \\, \" and \n; samples have no timestamp; series are unique; and
// each histogram series has buckets with rising bounds and non-decreasing
// counts, a +Inf bucket equal to its _count, and a _sum.
func parseExposition(text string) (*exposition, error) {
	if text == "" || !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the exposition must end with a newline")
	}
	x := &exposition{types: map[string]string{}}
	seen := map[string]bool{}
	var family, typ string
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if !metricNameRe.MatchString(name) || help == "" {
				return nil, fmt.Errorf("line %d: bad HELP line %q", i+1, line)
			}
			if _, dup := x.types[name]; dup {
				return nil, fmt.Errorf("line %d: family %s appears twice", i+1, name)
			}
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(help, `\\`, ""), `\n`, ""), `\`) {
				return nil, fmt.Errorf("line %d: bad escape in HELP", i+1)
			}
			if i+1 >= len(lines) {
				return nil, fmt.Errorf("line %d: HELP without TYPE", i+1)
			}
			i++
			f := strings.Fields(lines[i])
			if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" || f[2] != name {
				return nil, fmt.Errorf("line %d: want the TYPE line of %s, got %q", i+1, name, lines[i])
			}
			switch f[3] {
			case "counter":
				if !strings.HasSuffix(name, "_total") {
					return nil, fmt.Errorf("line %d: counter %s does not end in _total", i+1, name)
				}
			case "gauge", "histogram", "summary":
			default:
				return nil, fmt.Errorf("line %d: type %q", i+1, f[3])
			}
			family, typ = name, f[3]
			x.types[name] = typ
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			return nil, fmt.Errorf("line %d: unexpected line %q", i+1, line)
		}
		if family == "" {
			return nil, fmt.Errorf("line %d: sample before any TYPE line", i+1)
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		s.family = family
		switch typ {
		case "histogram":
			suffix, ok := strings.CutPrefix(s.name, family)
			if !ok || (suffix != "_bucket" && suffix != "_sum" && suffix != "_count") {
				return nil, fmt.Errorf("line %d: sample %s in histogram %s", i+1, s.name, family)
			}
			if _, hasLE := s.labels["le"]; hasLE != (suffix == "_bucket") {
				return nil, fmt.Errorf("line %d: le label on %s", i+1, s.name)
			}
		case "summary":
			suffix, ok := strings.CutPrefix(s.name, family)
			if !ok || (suffix != "" && suffix != "_sum" && suffix != "_count") {
				return nil, fmt.Errorf("line %d: sample %s in summary %s", i+1, s.name, family)
			}
			if q, hasQ := s.labels["quantile"]; hasQ != (suffix == "") {
				return nil, fmt.Errorf("line %d: quantile label on %s", i+1, s.name)
			} else if hasQ {
				if v, err := strconv.ParseFloat(q, 64); err != nil || v < 0 || v > 1 {
					return nil, fmt.Errorf("line %d: quantile %q", i+1, q)
				}
			}
			if _, hasLE := s.labels["le"]; hasLE {
				return nil, fmt.Errorf("line %d: le label outside a histogram", i+1)
			}
		default:
			if s.name != family {
				return nil, fmt.Errorf("line %d: sample %s in family %s", i+1, s.name, family)
			}
			if _, hasLE := s.labels["le"]; hasLE {
				return nil, fmt.Errorf("line %d: le label outside a histogram", i+1)
			}
		}
		if typ == "counter" && !(s.value >= 0) {
			return nil, fmt.Errorf("line %d: counter value %v", i+1, s.value)
		}
		key := s.name + "{" + canonLabels(s.labels, "") + "}"
		if seen[key] {
			return nil, fmt.Errorf("line %d: series %s appears twice", i+1, key)
		}
		seen[key] = true
		x.samples = append(x.samples, s)
	}
	return x, x.checkHistograms()
}

// parseSample parses `name{label="value",...} value`.
func parseSample(line string) (expoSample, error) {
	s := expoSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.name = line[:i]
	if !metricNameRe.MatchString(s.name) {
		return s, fmt.Errorf("bad metric name %q", s.name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			name := rest[:eq]
			if !labelNameRe.MatchString(name) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' {
					if j+1 >= len(rest) {
						return s, fmt.Errorf("unfinished escape in %q", line)
					}
					switch rest[j+1] {
					case '\\':
						v.WriteByte('\\')
					case '"':
						v.WriteByte('"')
					case 'n':
						v.WriteByte('\n')
					default:
						return s, fmt.Errorf("bad escape \\%c in %q", rest[j+1], line)
					}
					j++
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				if c == '\n' {
					return s, fmt.Errorf("newline in a label value")
				}
				v.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value in %q", line)
			}
			if _, dup := s.labels[name]; dup {
				return s, fmt.Errorf("label %s twice in %q", name, line)
			}
			s.labels[name] = v.String()
			if strings.HasPrefix(rest, ",") && !strings.HasPrefix(rest, ",}") {
				rest = rest[1:]
				continue
			}
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			return s, fmt.Errorf("bad label separator in %q", line)
		}
	}
	val, ok := strings.CutPrefix(rest, " ")
	if !ok || val == "" || strings.ContainsAny(val, " \t") {
		return s, fmt.Errorf("want one space and one value (no timestamp) in %q", line)
	}
	v, err := parseValue(val)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "_xXpPiInN") { // Go's extras: 1_000, hex floats, Inf spellings
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
}

// canonLabels is the labels without skip, sorted, as one string.
func canonLabels(labels map[string]string, skip string) string {
	var parts []string
	for k, v := range labels {
		if k != skip {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// checkHistograms checks every histogram series: bounds rise, counts do not
// fall, the last bucket is +Inf and equals _count, and _sum is there.
func (x *exposition) checkHistograms() error {
	type series struct {
		bounds, counts []float64
		sum, count     *float64
	}
	all := map[string]*series{}
	var order []string
	for _, s := range x.samples {
		if x.types[s.family] != "histogram" {
			continue
		}
		key := s.family + "{" + canonLabels(s.labels, "le") + "}"
		h := all[key]
		if h == nil {
			h = &series{}
			all[key] = h
			order = append(order, key)
		}
		v := s.value
		switch strings.TrimPrefix(s.name, s.family) {
		case "_bucket":
			le, err := parseValue(s.labels["le"])
			if err != nil || math.IsNaN(le) {
				return fmt.Errorf("%s: bad le %q", key, s.labels["le"])
			}
			if h.sum != nil || h.count != nil {
				return fmt.Errorf("%s: bucket after _sum or _count", key)
			}
			if n := len(h.bounds); n > 0 && (le <= h.bounds[n-1] || v < h.counts[n-1]) {
				return fmt.Errorf("%s: bucket le=%s (%v) after le=%v (%v)", key, s.labels["le"], v, h.bounds[n-1], h.counts[n-1])
			}
			if v < 0 || v != math.Trunc(v) {
				return fmt.Errorf("%s: bucket count %v", key, v)
			}
			h.bounds, h.counts = append(h.bounds, le), append(h.counts, v)
		case "_sum":
			h.sum = &v
		case "_count":
			h.count = &v
		}
	}
	for _, key := range order {
		h := all[key]
		n := len(h.bounds)
		switch {
		case n == 0 || !math.IsInf(h.bounds[n-1], 1):
			return fmt.Errorf("%s: no +Inf bucket", key)
		case h.count == nil || h.sum == nil:
			return fmt.Errorf("%s: _sum or _count missing", key)
		case *h.count != h.counts[n-1]:
			return fmt.Errorf("%s: +Inf bucket %v, _count %v", key, h.counts[n-1], *h.count)
		}
	}
	return nil
}

// find returns the sample of name with exactly the given labels.
func (x *exposition) find(name string, labels ...string) (expoSample, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, s := range x.samples {
		if s.name == name && canonLabels(s.labels, "") == canonLabels(want, "") {
			return s, true
		}
	}
	return expoSample{}, false
}

func (x *exposition) has(name string, labels ...string) bool {
	_, ok := x.find(name, labels...)
	return ok
}

func (x *exposition) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	s, ok := x.find(name, labels...)
	if !ok {
		t.Fatalf("no sample %s%v", name, labels)
	}
	return s.value
}

func (x *exposition) want(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	s, ok := x.find(name, labels...)
	switch {
	case !ok:
		t.Errorf("no sample %s%v", name, labels)
	case s.value != want:
		t.Errorf("%s%v = %v, want %v", name, labels, s.value, want)
	}
}

// hasLabel reports whether any sample of name has the label with value.
func (x *exposition) hasLabel(name, label, value string) bool {
	for _, s := range x.samples {
		if s.name == name && s.labels[label] == value {
			return true
		}
	}
	return false
}

// labelValues lists the values of a label among the samples of name.
func (x *exposition) labelValues(name, label string) []string {
	var out []string
	for _, s := range x.samples {
		if v, ok := s.labels[label]; ok && s.name == name && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
