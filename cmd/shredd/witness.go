package main

// Witnessed checkpoints (C2SP tlog-witness, docs/transparency.md#witnesses):
// `shredd witness`, a minimal witness an auditor runs; serve's --witness,
// which sends each new checkpoint to witnesses and staples their
// cosignatures; verify's --witness and --witnesses-required.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/translog"
	"github.com/shredd/shredd/witness"
)

// keyArg reads a key given on the command line: the key itself, or the
// path of a file holding it (such as shredd-data/log.vkey).
func keyArg(arg string) (string, error) {
	if _, err := os.Lstat(arg); err == nil {
		b, err := readLimited(arg)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	} else if !strings.Contains(arg, "+") {
		return "", fmt.Errorf("no such file, and not a key: %w", err)
	}
	return strings.TrimSpace(arg), nil
}

// witnessVerifiers parses the cosignature/v1 verifier keys of --witness
// (keys or files), refusing one public key given twice: it would count as
// two witnesses.
func witnessVerifiers(args []string) ([]note.Verifier, error) {
	var vs []note.Verifier
	seen := map[string]bool{}
	for _, a := range args {
		k, err := keyArg(a)
		if err != nil {
			return nil, fmt.Errorf("--witness %s: %v", a, err)
		}
		v, err := translog.NewCosignatureVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("--witness %s: %v", a, err)
		}
		pub := strings.SplitN(k, "+", 3)[2] // the type byte and public key
		if seen[pub] {
			return nil, fmt.Errorf("--witness %s: the same public key is given twice; each witness counts once", a)
		}
		seen[pub] = true
		vs = append(vs, v)
	}
	return vs, nil
}

// witnessUsage is the help of shredd witness.
const witnessUsage = `usage: shredd witness keygen --name NAME --key FILE
       shredd witness --key FILE --log VKEY [--log VKEY ...] --state DIR [--listen ADDR]
       a minimal C2SP tlog-witness: it cosigns the checkpoints of the logs it is given
       (POST /add-checkpoint) after checking each one's signature and its consistency
       proof from the last checkpoint it cosigned of that log, which it keeps in DIR.
       It never goes back: a smaller tree, or another root for a size it cosigned
       (a split view), is refused, and the refused checkpoint is kept in DIR/evidence.
       keygen writes a new cosignature/v1 key to FILE (secret) and FILE.vkey (public:
       give it to the log's operator for serve --witness, and to verifiers).
       VKEY is a log's verifier key (shredd-data/log.vkey), or the file holding it.`

// witnessCmd runs `shredd witness`: the witness server until ctx ends, or
// keygen.
func witnessCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "keygen" {
		return witnessKeygen(args[1:], stdout, stderr)
	}
	fl := flag.NewFlagSet("shredd witness", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "127.0.0.1:7760", "address to serve POST /add-checkpoint on")
	keyPath := fl.String("key", "", "the witness's cosignature/v1 private key (from shredd witness keygen)")
	state := fl.String("state", "", "directory keeping the last checkpoint cosigned of each log, and the evidence of refused ones (created 0700)")
	var logs stringList
	fl.Var(&logs, "log", "a log to witness: its verifier key, or a file holding it (repeat for each log)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, witnessUsage)
		fl.PrintDefaults()
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shredd witness: %s\n%s\n", fmt.Sprintf(format, a...), witnessUsage)
		return exitUsage
	}
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	switch {
	case fl.NArg() > 0:
		return usage("unexpected argument %q", fl.Arg(0))
	case *keyPath == "":
		return usage("--key is required")
	case len(logs) == 0:
		return usage("give at least one --log")
	case *state == "":
		return usage("--state is required")
	}
	skey, err := datadir.Read(*keyPath, datadir.Secret, maxKeyFile)
	if err != nil {
		return usage("--key: %v", err)
	}
	cosigner, err := translog.NewCosigner(strings.TrimSpace(string(skey)), nil)
	if err != nil {
		return usage("--key %s: %v", *keyPath, err)
	}
	var verifiers []note.Verifier
	for _, l := range logs {
		k, err := keyArg(l)
		if err != nil {
			return usage("--log %s: %v", l, err)
		}
		v, err := note.NewVerifier(k)
		if err != nil {
			return usage("--log %s: not a log verifier key: %v", l, err)
		}
		verifiers = append(verifiers, v)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	w, err := witness.New(witness.Config{Cosigner: cosigner, Logs: verifiers, StateDir: *state, Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "shredd witness:", err)
		return exitFailed
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "shredd witness:", err)
		return exitFailed
	}
	vkey, _ := translog.CosignerVerifierKey(cosigner)
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	origins := make([]string, len(verifiers))
	for i, v := range verifiers {
		origins[i] = v.Name()
	}
	logger.Info("listening", "addr", ln.Addr().String(), "witness", cosigner.Name(), "verifier_key", vkey, "logs", origins)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "shredd witness:", err)
		return exitFailed
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shCtx); err != nil {
		fmt.Fprintln(stderr, "shredd witness:", err)
		return exitFailed
	}
	return exitOK
}

// witnessKeygen runs `shredd witness keygen --name NAME --key FILE`.
func witnessKeygen(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd witness keygen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	name := fl.String("name", "", "the witness's name, a schema-less URL such as witness.example/w1 (no spaces, no +)")
	keyPath := fl.String("key", "", "file to write the private key to (mode 0600, never overwritten); the verifier key goes to FILE.vkey")
	fl.Usage = func() {
		fmt.Fprintln(stderr, witnessUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if *name == "" || *keyPath == "" || fl.NArg() > 0 {
		fmt.Fprintf(stderr, "shredd witness keygen: --name and --key are required, and nothing else\n%s\n", witnessUsage)
		return exitUsage
	}
	skey, vkey, err := translog.GenerateCosignerKey(*name)
	if err != nil {
		fmt.Fprintf(stderr, "shredd witness keygen: %v\n", err)
		return exitUsage
	}
	if err := datadir.Create(*keyPath, []byte(skey+"\n"), datadir.Secret); err != nil {
		fmt.Fprintf(stderr, "shredd witness keygen: %v\n", err)
		return exitFailed
	}
	if err := datadir.Create(*keyPath+".vkey", []byte(vkey+"\n"), datadir.Public); err != nil {
		fmt.Fprintf(stderr, "shredd witness keygen: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, vkey)
	fmt.Fprintf(stderr, "wrote %s (private, mode 0600: keep it secret) and %s (the verifier key above: give it to the log's operator and to verifiers)\n",
		*keyPath, filepath.Clean(*keyPath+".vkey"))
	return exitOK
}

// parseWitnessTargets parses serve's --witness URL=VKEY values (VKEY: the
// witness's verifier key, or a file holding it).
func parseWitnessTargets(args []string) ([]witness.Target, error) {
	var ts []witness.Target
	var keys []string
	for _, a := range args {
		// The value is not echoed in errors: a URL may hold a password.
		u, k, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("--witness (value %d): want URL=VKEY", len(ts)+1)
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil || pu.RawQuery != "" || pu.Fragment != "" {
			return nil, fmt.Errorf("--witness (value %d): want an http:// or https:// URL, with no credentials or query, before the =", len(ts)+1)
		}
		keys = append(keys, k)
		ts = append(ts, witness.Target{URL: u})
	}
	vs, err := witnessVerifiers(keys)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		ts[i].Key = vs[i]
	}
	return ts, nil
}

// startWitnesses starts the sender of the log's checkpoints to the
// witnesses of --witness, when there are some; stopWitnesses stops it.
func (p *Program) startWitnesses(ctx context.Context) {
	if len(p.witnessTargets) == 0 {
		return
	}
	l, _ := p.node.Evidence.TransparencyLog()
	if l == nil {
		p.Logger.Warn("--witness given, but this service keeps no transparency log")
		return
	}
	s := witness.NewSender(l, p.witnessTargets, p.WitnessInterval, p.Logger)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(wctx)
	}()
	p.stopWitness = func() {
		stop()
		<-done
	}
}

func (p *Program) stopWitnesses() {
	if p.stopWitness != nil {
		p.stopWitness()
	}
}

// witnessFlags are verify's --witness and --witnesses-required.
type witnessFlags struct {
	keys     stringList
	required int
}

func (w *witnessFlags) register(fl *flag.FlagSet) {
	fl.Var(&w.keys, "witness", "a witness's cosignature/v1 verifier key, or a file holding it (repeat for each witness trusted)")
	w.required = -1
	fl.IntVar(&w.required, "witnesses-required", -1, "refuse an export whose checkpoint carries fewer valid cosignatures of the --witness keys, 1 to their number (default: all of them)")
}

// keyFiles returns the trusted witnesses' keys as given, each a file's
// bytes or the argument itself, unchanged (bundle reads them strictly),
// and the number required (0: all of them).
func (w *witnessFlags) keyFiles() ([][]byte, int, error) {
	var out [][]byte
	for _, a := range w.keys {
		if _, err := os.Lstat(a); err == nil {
			b, err := readLimited(a)
			if err != nil {
				return nil, 0, fmt.Errorf("--witness %s: %v", a, err)
			}
			out = append(out, b)
		} else if strings.Contains(a, "+") {
			out = append(out, []byte(a))
		} else {
			return nil, 0, fmt.Errorf("--witness %s: no such file, and not a key: %w", a, err)
		}
	}
	req := w.required
	switch {
	case req >= 0 && len(out) == 0:
		return nil, 0, errNoWitnesses
	case req == -1:
		req = 0
	case req < 1 || req > len(out):
		return nil, 0, fmt.Errorf("--witnesses-required %d: want 1 to the %d --witness keys given", req, len(out))
	}
	return out, req, nil
}

// cosignedAt is a cosignature's time as a date when its year is 1 to
// 9999, else as the POSIX seconds it holds (up to 2^63-1).
func cosignedAt(c translog.Cosignature) string {
	const first, last = -62135596800, 253402300799 // 0001-01-01, 9999-12-31T23:59:59Z
	if c.Seconds < first || c.Seconds > last {
		return fmt.Sprintf("time %d", c.Seconds)
	}
	return time.Unix(c.Seconds, 0).UTC().Format(time.RFC3339)
}

// errNoWitnesses is for verify given --witnesses-required without keys.
var errNoWitnesses = errors.New("--witnesses-required needs the trusted witnesses' keys (--witness)")

// witnessSummary is verify's line about the cosignatures of an export's
// checkpoint.
func witnessSummary(w *translog.WitnessReport, required int) string {
	names := make([]string, len(w.Valid))
	for i, c := range w.Valid {
		names[i] = fmt.Sprintf("%s (%s)", c.Witness, cosignedAt(c))
	}
	s := fmt.Sprintf("%d of %d required cosignatures valid: %s", len(w.Valid), required, strings.Join(names, ", "))
	if len(w.Missing) > 0 {
		s += "; none from " + strings.Join(w.Missing, ", ")
	}
	if len(w.Invalid) > 0 {
		s += "; invalid from " + strings.Join(w.Invalid, ", ")
	}
	return s
}
