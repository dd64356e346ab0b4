package vault_test

// BenchmarkPerSubjectScale measures where one Transit key per subject
// (SubjectKeys, --subject-keys transit) stops scaling, next to the key tree
// (one Transit root key), against a real Vault with file storage
// (vaulttest.Persistent). docs/persubject-scaling.md has the results. It only
// runs with -bench and takes minutes; each measurement is done once, whatever
// -benchtime says:
//
//	go test -run '^$' -bench PerSubjectScale -benchtime 1x -timeout 60m ./keystore/vault/
//	go test -run '^$' -bench PerSubjectScale -benchtime 1x ./keystore/vault/ \
//	    -shredd.scale.keys=1000,5000 -shredd.scale.caches=0   # a quick look
//
// For each Transit cache configuration (0: Vault's default, unbounded; n: a
// transit/cache-config of n entries, written and then made effective by a
// restart) it starts a fresh Vault and, at each key count N, reports:
//
//   - creation throughput of SubjectKeys.DataKey for new subjects with
//     -shredd.scale.conc goroutines (one Transit key created per subject);
//   - latency of Decrypt of random existing subjects and of DataKey of new
//     subjects, one request at a time, while the keys are warm in Vault;
//   - the same Decrypt after a Vault restart (every sampled key is read from
//     storage: Vault loads Transit keys lazily), and the throughput of
//     touching every key once after the restart;
//   - Vault's VmRSS (and the Go heap Vault reports in sys/metrics) after
//     creation, after the restart, and once every key has been touched;
//   - the key tree's cold path on the same Vault: Root.Unwrap of one bucket
//     key blob under the root key plus the local AES-GCM unwrap of a DEK.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/vaulttest"
)

var (
	scaleKeys    = flag.String("shredd.scale.keys", "10000,100000", "BenchmarkPerSubjectScale: comma-separated numbers of per-subject Transit keys to measure at")
	scaleCaches  = flag.String("shredd.scale.caches", "0,1000", "BenchmarkPerSubjectScale: comma-separated transit/cache-config sizes (0 = Vault's default, unbounded)")
	scaleConc    = flag.Int("shredd.scale.conc", 16, "BenchmarkPerSubjectScale: goroutines creating (and touching) keys")
	scaleSamples = flag.Int("shredd.scale.samples", 2000, "BenchmarkPerSubjectScale: sequential operations per latency sample")
	scaleRestart = flag.Bool("shredd.scale.cache-restart", true, "BenchmarkPerSubjectScale: restart Vault after writing transit/cache-config (false: measure without the restart)")
)

func intList(b *testing.B, s string) []int {
	b.Helper()
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("bad number %q in %q", f, s)
		}
		out = append(out, n)
	}
	return out
}

// scaleSID is the sid of subject i.
func scaleSID(i int) envelope.SID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return envelope.SID(sha256.Sum256(append([]byte("shredd/scale\x00"), b[:]...)))
}

// vaultProc is the Vault server process of a vaulttest.Server, found through
// /proc: a "vault server" process whose command line has the listen address
// (dev servers) or names a config file that has it (persistent servers).
type vaultProc struct {
	pid     int
	dataDir string // file storage directory (persistent servers)
}

func findVault(b *testing.B, srv *vaulttest.Server) vaultProc {
	b.Helper()
	u, err := url.Parse(srv.Addr)
	if err != nil {
		b.Fatal(err)
	}
	hostport := u.Host
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var found []vaultProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "vault" || args[1] != "server" {
			continue
		}
		for _, a := range args[2:] {
			if strings.Contains(a, hostport) {
				found = append(found, vaultProc{pid: pid})
				break
			}
			if cfg, ok := strings.CutPrefix(a, "-config="); ok {
				if hcl, err := os.ReadFile(cfg); err == nil && bytes.Contains(hcl, []byte(`"`+hostport+`"`)) {
					found = append(found, vaultProc{pid: pid, dataDir: filepath.Join(filepath.Dir(cfg), "data")})
					break
				}
			}
		}
	}
	if len(found) != 1 {
		b.Fatalf("found %d vault processes for %s, want 1: %v", len(found), hostport, found)
	}
	return found[0]
}

// status reads VmRSS and VmHWM of the process, in bytes.
func (p vaultProc) status(b *testing.B) (rss, hwm int64) {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	return rss, hwm
}

// storage sums the files of the file storage backend: their number, their
// sizes, and the disk space they take.
func (p vaultProc) storage(b *testing.B) (files int, size, blocks int64) {
	b.Helper()
	if p.dataDir == "" {
		return 0, 0, 0
	}
	err := filepath.WalkDir(p.dataDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files++
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += sys.Blocks * 512
		}
		size += fi.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, size, blocks
}

// heap reads the Go heap in use (vault.runtime.alloc_bytes) from Vault's
// in-memory telemetry, or -1 when Vault does not report it.
func heap(srv *vaulttest.Server) float64 {
	for range 5 {
		if v := heapOnce(srv); v >= 0 {
			return v
		}
		time.Sleep(time.Second)
	}
	return -1
}

func heapOnce(srv *vaulttest.Server) float64 {
	resp, err := srv.Client("").Logical().ReadRaw("sys/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var m struct {
		Gauges []struct {
			Name  string
			Value float64
		}
	}
	if err := resp.DecodeJSON(&m); err != nil {
		return -1
	}
	for _, g := range m.Gauges {
		if g.Name == "vault.runtime.alloc_bytes" {
			return g.Value
		}
	}
	return -1
}

// timeWait counts TCP connections to the server's port in TIME_WAIT: the
// connections the client opened and closed.
func timeWait(srv *vaulttest.Server) int {
	u, _ := url.Parse(srv.Addr)
	port, _ := strconv.Atoi(u.Port())
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return -1
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, l := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasSuffix(f[2], want) && f[3] == "06" {
			n++
		}
	}
	return n
}

type lat struct{ p50, p99, mean time.Duration }

func latOf(d []time.Duration) lat {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return lat{p50: q(0.50), p99: q(0.99), mean: sum / time.Duration(len(d))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func loadavg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// scaleStage is what one key count gives.
type scaleStage struct {
	keys                   int // per-subject keys when Decrypt was sampled
	keysAfter              int // and after the DataKey sample
	created                int // keys created in this stage's fill
	createRate             float64
	createTW               int // connections to Vault in TIME_WAIT at the end of the fill
	decWarm, dataKey, tree lat
	decCold                lat
	touchRate              float64
	restart                time.Duration
	rssCreated, rssWarm    int64
	rssRestart, rssTouched int64
	hwm                    int64
	heapWarm, heapTouched  float64
	files                  int
	bytes, disk            int64
	load                   string
}

type subject struct {
	sid    envelope.SID
	pt, ct []byte
}

// scaleRun is one Vault with one cache configuration, filled stage by stage.
type scaleRun struct {
	b     *testing.B
	srv   *vaulttest.Server
	st    *vault.Root
	sk    *vault.SubjectKeys
	cache int
	proc  vaultProc
	subs  []subject
	rng   *mrand.Rand

	bucketBlob []byte // a bucket key wrapped under the root key
	dekBlob    []byte // a DEK wrapped under that bucket key, locally
	dek        []byte
}

func (r *scaleRun) start() {
	b := r.b
	ctx := context.Background()
	r.srv = vaulttest.Persistent(b)
	c := r.srv.Client("")
	if r.cache > 0 {
		if _, err := c.Logical().Write("transit/cache-config", map[string]any{"size": r.cache}); err != nil {
			b.Fatal(err)
		}
		before, err := c.Logical().Read("transit/cache-config")
		if err != nil {
			b.Fatal(err)
		}
		if !*scaleRestart {
			fmt.Printf("transit/cache-config size=%d: read back %v, no restart\n", r.cache, before.Data["size"])
		} else {
			r.srv.Restart()
			after, err := c.Logical().Read("transit/cache-config")
			if err != nil {
				b.Fatal(err)
			}
			// Printed, not logged: a parent benchmark's log is not shown.
			fmt.Printf("transit/cache-config size=%d: read back %v before the restart, %v after\n", r.cache, before.Data["size"], after.Data["size"])
			if fmt.Sprint(after.Data["size"]) != strconv.Itoa(r.cache) {
				b.Fatalf("transit/cache-config after restart: %v, want size %d", after.Data, r.cache)
			}
		}
	} else {
		sec, err := c.Logical().Read("transit/cache-config")
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("transit/cache-config (default): %v\n", sec.Data)
	}
	r.proc = findVault(b, r.srv)
	st, err := vault.Open(ctx, vault.Config{Address: r.srv.Addr, Token: r.srv.RootToken, Key: "shredd-root"})
	if err != nil {
		b.Fatal(err)
	}
	r.st, r.sk = st, st.SubjectKeys()
	r.rng = mrand.New(mrand.NewPCG(1, uint64(r.cache)))

	// The key tree's cold path needs one bucket key wrapped under the root
	// and one DEK wrapped under the bucket key (nonce ‖ AES-256-GCM, as
	// keystore.wrapDEK does).
	bk := make([]byte, 32)
	r.dek = make([]byte, 32)
	rand.Read(bk)
	rand.Read(r.dek)
	w, err := st.Wrap(ctx, [][]byte{bk})
	if err != nil {
		b.Fatal(err)
	}
	r.bucketBlob = w[0].Blob
	a := gcm(b, bk)
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce)
	r.dekBlob = a.Seal(nonce, nonce, r.dek, []byte("aad"))
}

func gcm(b *testing.B, k []byte) cipher.AEAD {
	c, err := aes.NewCipher(k)
	if err != nil {
		b.Fatal(err)
	}
	a, err := cipher.NewGCM(c)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// fill creates per-subject keys until there are n, with conc goroutines.
func (r *scaleRun) fill(n int) (int, float64) {
	b := r.b
	ctx := context.Background()
	from := len(r.subs)
	if n <= from {
		return 0, 0
	}
	r.subs = append(r.subs, make([]subject, n-from)...)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var once sync.Once
	var ferr error
	start := time.Now()
	for range *scaleConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				sid := scaleSID(i)
				pt, ct, err := r.sk.DataKey(ctx, sid)
				if err != nil {
					once.Do(func() { ferr = fmt.Errorf("DataKey of subject %d: %w", i, err) })
					return
				}
				r.subs[i] = subject{sid: sid, pt: pt, ct: ct}
				if i > from && (i-from)%20000 == 0 {
					el := time.Since(start)
					fmt.Fprintf(os.Stderr, "  cache=%d: %d keys, %.0f keys/s, load %s\n", r.cache, i, float64(i-from)/el.Seconds(), loadavg())
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if ferr != nil {
		b.Fatal(ferr)
	}
	return n - from, float64(n-from) / el.Seconds()
}

// decrypts times Decrypt of random existing subjects, one at a time.
func (r *scaleRun) decrypts(samples int) lat {
	b := r.b
	ctx := context.Background()
	d := make([]time.Duration, samples)
	for i := range d {
		s := r.subs[r.rng.IntN(len(r.subs))]
		t0 := time.Now()
		pt, err := r.sk.Decrypt(ctx, s.sid, s.ct)
		d[i] = time.Since(t0)
		if err != nil || !bytes.Equal(pt, s.pt) {
			b.Fatalf("Decrypt: %v (plaintext equal: %v)", err, bytes.Equal(pt, s.pt))
		}
	}
	return latOf(d)
}

// dataKeys times DataKey for new subjects, one at a time; the new keys join
// the pool.
func (r *scaleRun) dataKeys(samples int) lat {
	b := r.b
	ctx := context.Background()
	d := make([]time.Duration, samples)
	for i := range d {
		sid := scaleSID(len(r.subs))
		t0 := time.Now()
		pt, ct, err := r.sk.DataKey(ctx, sid)
		d[i] = time.Since(t0)
		if err != nil {
			b.Fatalf("DataKey: %v", err)
		}
		r.subs = append(r.subs, subject{sid: sid, pt: pt, ct: ct})
	}
	return latOf(d)
}

// tree times the key tree's cold path: one Transit decrypt of a bucket key
// blob under the root key and the local AES-GCM unwrap of a DEK under it.
func (r *scaleRun) tree(samples int) lat {
	b := r.b
	ctx := context.Background()
	d := make([]time.Duration, samples)
	for i := range d {
		t0 := time.Now()
		bks, err := r.st.Unwrap(ctx, [][]byte{r.bucketBlob})
		if err != nil {
			b.Fatalf("Unwrap: %v", err)
		}
		a := gcm(b, bks[0])
		ns := a.NonceSize()
		dek, err := a.Open(nil, r.dekBlob[:ns], r.dekBlob[ns:], []byte("aad"))
		d[i] = time.Since(t0)
		if err != nil || !bytes.Equal(dek, r.dek) {
			b.Fatalf("unwrap DEK: %v", err)
		}
	}
	return latOf(d)
}

// touchAll decrypts every subject once with conc goroutines.
func (r *scaleRun) touchAll() float64 {
	b := r.b
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var ferr error
	start := time.Now()
	for range *scaleConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(r.subs) {
					return
				}
				s := r.subs[i]
				pt, err := r.sk.Decrypt(ctx, s.sid, s.ct)
				if err != nil || !bytes.Equal(pt, s.pt) {
					once.Do(func() { ferr = fmt.Errorf("Decrypt of subject %d: %v", i, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
	return float64(len(r.subs)) / time.Since(start).Seconds()
}

// settle gives Vault's garbage collector a moment before memory is read.
func settle() { time.Sleep(3 * time.Second) }

func (r *scaleRun) stage(n int) *scaleStage {
	b := r.b
	samples := *scaleSamples
	st := &scaleStage{load: loadavg()}
	st.created, st.createRate = r.fill(n)
	st.createTW = timeWait(r.srv)
	settle()
	st.rssCreated, _ = r.proc.status(b)
	st.keys = len(r.subs)
	if st.keys > 0 {
		st.decWarm = r.decrypts(samples)
	}
	st.tree = r.tree(samples)
	if n > 0 {
		st.dataKey = r.dataKeys(samples)
	}
	st.keysAfter = len(r.subs)
	settle()
	st.rssWarm, _ = r.proc.status(b)
	st.heapWarm = heap(r.srv)
	st.files, st.bytes, st.disk = r.proc.storage(b)

	// Cold: a restart empties Vault's caches (Transit's key cache and the
	// physical storage cache); Transit loads keys when first used. With no
	// subject keys, this is the key tree's Vault: one Transit key.
	t0 := time.Now()
	r.srv.Restart()
	st.restart = time.Since(t0)
	r.proc = findVault(b, r.srv)
	settle()
	st.rssRestart, _ = r.proc.status(b)
	if st.keys > 0 {
		st.decCold = r.decrypts(samples)
		st.touchRate = r.touchAll()
	} else {
		r.tree(1) // loads the root key
	}
	settle()
	st.rssTouched, st.hwm = r.proc.status(b)
	st.heapTouched = heap(r.srv)
	st.load += " → " + loadavg()
	return st
}

func (st *scaleStage) report(b *testing.B) {
	b.ReportMetric(float64(st.keys), "keys")
	if st.created > 0 {
		b.ReportMetric(st.createRate, "creates/s")
	}
	if st.keys > 0 {
		b.ReportMetric(ms(st.decWarm.p50), "decrypt-p50-ms")
		b.ReportMetric(ms(st.decWarm.p99), "decrypt-p99-ms")
		b.ReportMetric(ms(st.decCold.p50), "decrypt-restarted-p50-ms")
		b.ReportMetric(ms(st.decCold.p99), "decrypt-restarted-p99-ms")
		b.ReportMetric(ms(st.dataKey.p50), "datakey-p50-ms")
		b.ReportMetric(ms(st.dataKey.p99), "datakey-p99-ms")
		b.ReportMetric(st.touchRate, "touch-all-decrypts/s")
	}
	b.ReportMetric(mib(st.rssRestart), "rss-restarted-MiB")
	b.ReportMetric(mib(st.rssTouched), "rss-touched-MiB")
	b.ReportMetric(mib(st.rssWarm), "rss-MiB")
	b.ReportMetric(ms(st.tree.p50), "tree-unwrap-p50-ms")
	b.ReportMetric(ms(st.tree.p99), "tree-unwrap-p99-ms")
}

func BenchmarkPerSubjectScale(b *testing.B) {
	keys := intList(b, *scaleKeys)
	caches := intList(b, *scaleCaches)
	slices.Sort(keys)
	keys = append([]int{0}, slices.Compact(keys)...)
	fmt.Printf("PerSubjectScale: GOMAXPROCS %d, NumCPU %d, load %s, concurrency %d, %d samples per latency, keys %v, caches %v\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), loadavg(), *scaleConc, *scaleSamples, keys[1:], caches)

	type row struct {
		cache int
		st    *scaleStage
	}
	var rows []row
	for _, cache := range caches {
		name := "cache=unbounded"
		if cache > 0 {
			name = fmt.Sprintf("cache=%d", cache)
		}
		b.Run(name, func(b *testing.B) {
			r := &scaleRun{b: b, cache: cache}
			r.start()
			done := map[int]*scaleStage{}
			for _, n := range keys {
				b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
					// Measured once; later calls of the same sub-benchmark
					// (a -benchtime above one run) report the same numbers.
					st := done[n]
					if st == nil {
						r.b = b
						st = r.stage(n)
						done[n] = st
						rows = append(rows, row{cache, st})
						b.Logf("%d keys: %+v", n, *st)
					}
					st.report(b)
				})
			}
		})
	}

	var t strings.Builder
	fmt.Fprintf(&t, "\n%-9s %7s %9s | %-11s | %-11s | %-11s | %-11s | %8s | %7s %7s | %7s | %7s %7s | %-11s\n",
		"cache", "keys", "create/s", "decrypt", "restarted", "datakey", "tree", "touch/s", "RSS", "heap", "restart", "touched", "heap", "load")
	fmt.Fprintf(&t, "%-9s %7s %9s | %-11s | %-11s | %-11s | %-11s | %8s | %7s %7s | %7s | %7s %7s |\n",
		"", "", "", "p50/p99 ms", "p50/p99 ms", "p50/p99 ms", "p50/p99 ms", "", "MiB", "MiB", "MiB", "MiB", "MiB")
	pp := func(l lat) string { return fmt.Sprintf("%.2f/%.2f", ms(l.p50), ms(l.p99)) }
	for _, rw := range rows {
		st := rw.st
		c := "unbounded"
		if rw.cache > 0 {
			c = strconv.Itoa(rw.cache)
		}
		fmt.Fprintf(&t, "%-9s %7d %9.0f | %-11s | %-11s | %-11s | %-11s | %8.0f | %7.0f %7.0f | %7.0f | %7.0f %7.0f | %s\n",
			c, st.keys, st.createRate, pp(st.decWarm), pp(st.decCold), pp(st.dataKey), pp(st.tree), st.touchRate,
			mib(st.rssWarm), st.heapWarm/(1<<20), mib(st.rssRestart), mib(st.rssTouched), st.heapTouched/(1<<20), st.load)
	}
	fmt.Fprintf(&t, "\n%-9s %7s %9s %9s %10s %9s %10s %10s %12s\n", "cache", "keys", "files", "MiB", "bytes/key", "disk MiB", "disk/key", "restart s", "TIME_WAIT")
	for _, rw := range rows {
		st := rw.st
		per := 0.0
		if st.keysAfter > 0 {
			per = float64(st.bytes) / float64(st.keysAfter)
		}
		dper := 0.0
		if st.keysAfter > 0 {
			dper = float64(st.disk) / float64(st.keysAfter)
		}
		fmt.Fprintf(&t, "%-9d %7d %9d %9.1f %10.0f %9.1f %10.0f %10.2f %12d\n", rw.cache, st.keysAfter, st.files, mib(st.bytes), per,
			mib(st.disk), dper, st.restart.Seconds(), st.createTW)
	}
	// Printed, not logged: a parent benchmark's log is not shown.
	fmt.Println(t.String())
}
