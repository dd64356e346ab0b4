package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/cmd/shredd/node"
)

// Exit codes of the client subcommands. A script tells erased data (3) from
// every other failure.
const (
	exitOK       = 0
	exitFailed   = 1 // the server refused, or could not be reached
	exitUsage    = 2 // bad flags or arguments, no token
	exitShredded = 3 // 410: a subject of the data was forgotten
)

// maxStdin bounds what encrypt and decrypt read from standard input: the
// largest plaintext the envelope format allows.
const maxStdin = 64 << 20

// stringList is a flag that can be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// usageError is an error of the command line or the configuration (exit
// status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// serverFlags are the flags of a command that calls a running server:
// --addr (default SHREDD_URL), --token-file, --cacert (default
// SHREDD_CACERT) and --timeout.
type serverFlags struct {
	addr, tokenPath, caCert *string
	timeout                 *time.Duration
}

// addServerFlags defines the serverFlags on fl; tokenWhat says whose token
// --token-file holds, timeout and timeoutHelp the default and meaning of
// --timeout.
func addServerFlags(fl *flag.FlagSet, getenv func(string) string, tokenWhat string, timeout time.Duration, timeoutHelp string) serverFlags {
	defAddr := client.DefaultURL
	if v := getenv("SHREDD_URL"); v != "" {
		defAddr = v
	}
	return serverFlags{
		addr:      fl.String("addr", defAddr, "URL of the shredd server (SHREDD_URL)"),
		tokenPath: fl.String("token-file", "", "file holding "+tokenWhat+" (default: SHREDD_TOKEN, else the admin token of ./shredd-data or $SHREDD_DATA_DIR)"),
		caCert:    fl.String("cacert", getenv("SHREDD_CACERT"), "PEM file of the CA of the server's TLS certificate (SHREDD_CACERT)"),
		timeout:   fl.Duration("timeout", timeout, timeoutHelp),
	}
}

// connect returns the client of the server the flags name, or nil and the
// exit status (usage or failed) once the error is printed after name.
func (f serverFlags) connect(name string, stderr io.Writer, getenv func(string) string) (*client.Client, int) {
	c, err := newClient(*f.addr, *f.tokenPath, *f.caCert, getenv)
	if err == nil {
		return c, exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if errors.As(err, new(usageError)) {
		return nil, exitUsage
	}
	return nil, exitFailed
}

// clientCmd runs `shredd encrypt|decrypt|forget|status`: a client of a
// running server, through the Go client (api/client). The token comes from
// --token-file, else SHREDD_TOKEN, else the admin token of the data
// directory ($SHREDD_DATA_DIR or ./shredd-data) when that file exists; never
// from a flag value, since command lines are visible to other users.
func clientCmd(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	r := &clientRun{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr}
	fl := flag.NewFlagSet("shredd "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := addServerFlags(fl, getenv, "the bearer token", time.Minute, "time limit of the call")
	r.commandFlags(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, clientUsage)
		fl.PrintDefaults()
	}
	// The forget id may come before or after the flags.
	positional, err := parseInterleaved(fl, args)
	if err != nil {
		return exitUsage
	}
	r.positional = positional
	if problem := r.argsProblem(); problem != "" {
		return r.usage("%s", problem)
	}
	// The field is checked before the call: an encrypt must not register
	// an artifact whose answer then cannot be printed.
	if problem := r.fieldProblem(); problem != "" {
		return r.usage("%s", problem)
	}
	var code int
	if r.c, code = sf.connect("shredd "+cmd, stderr, getenv); r.c == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *sf.timeout)
	defer cancel()
	run, ok := clientCommands[cmd]
	if !ok {
		run = (*clientRun).status
	}
	return run(r, ctx)
}

// clientRun is one run of a client subcommand: its streams, the flags of
// the subcommand, its positional arguments, and the client of the server.
type clientRun struct {
	cmd            string
	stdin          io.Reader
	stdout, stderr io.Writer

	subjects, parents            stringList
	leases, independentOf        stringList
	kind, aad, ciphertext, field string
	unit                         string
	subjectFile, reason          string
	keepLease, dryRun, yes       bool
	independent                  bool
	out                          string
	since                        int64
	positional                   []string
	c                            *client.Client
}

// clientCommands runs each client subcommand once its flags and arguments
// are checked and its client made.
var clientCommands = map[string]func(*clientRun, context.Context) int{
	"encrypt":     (*clientRun).encrypt,
	"decrypt":     (*clientRun).decrypt,
	"forget":      (*clientRun).forget,
	"reinstate":   (*clientRun).reinstate,
	"status":      (*clientRun).status,
	"attestation": (*clientRun).download,
	"export":      (*clientRun).download,
	"checkpoint":  (*clientRun).download,
}

// commandFlags defines the flags of r's subcommand, beyond the common ones.
func (r *clientRun) commandFlags(fl *flag.FlagSet) {
	switch r.cmd {
	case "encrypt":
		fl.Var(&r.subjects, "subject", "a subject the data is about (repeatable)")
		fl.Var(&r.parents, "parent", "id of an artifact the data derives from (repeatable)")
		fl.StringVar(&r.kind, "kind", "", "the artifact kind, registered (required)")
		fl.StringVar(&r.aad, "context", "", "a context bound into the ciphertext, needed again to decrypt")
		fl.Var(&r.leases, "lease", "id of a decrypt lease whose plaintext the data was made from: its lineage is inherited (repeatable)")
		fl.BoolVar(&r.independent, "independent", false, "declare that the data derives from no read of this token that it does not name (--lease, --parent)")
		fl.Var(&r.independentOf, "independent-of", "id of a decrypt lease of this token that the data does not derive from (repeatable)")
		fl.StringVar(&r.unit, "unit", "", "the unit of work of the write: it answers only for the reads of the same unit, or of none")
	case "decrypt":
		fl.StringVar(&r.aad, "context", "", "the context the ciphertext was sealed with")
		fl.StringVar(&r.ciphertext, "ciphertext", "", "the ciphertext (default: read from standard input)")
		fl.BoolVar(&r.keepLease, "keep-lease", false, "do not release the decrypt's lease; print its id on standard error, for the consumer of the plaintext to release (or to name with encrypt --lease)")
		fl.StringVar(&r.unit, "unit", "", "the unit of work of the read: only writes of the same unit, or of none, answer for it")
	case "forget":
		fl.Var(&r.subjects, "subject", "the subject to forget")
		fl.BoolVar(&r.dryRun, "dry-run", false, "change nothing: print what the forget would make unreadable (direct, derived, collateral, plaintext-held)")
		fl.BoolVar(&r.yes, "yes", false, "do not ask for confirmation (asked only when standard input is a terminal)")
	}
	if r.cmd == "reinstate" {
		fl.Var(&r.subjects, "subject", "the subject to reinstate (visible to other users in the process list: prefer --subject-file)")
		fl.StringVar(&r.subjectFile, "subject-file", "", "file holding the subject id, exactly (one final LF is dropped); - for standard input")
		fl.StringVar(&r.reason, "reason", "", "why (kept with the reinstatement, never logged: no personal data)")
	}
	switch r.cmd {
	case "encrypt", "forget", "reinstate", "status":
		fl.StringVar(&r.field, "field", "", "print only this field of the JSON answer, a string as it is (vault's -field): encrypt --field ciphertext | shredd decrypt")
	}
	switch r.cmd {
	case "attestation", "export", "checkpoint":
		fl.StringVar(&r.out, "out", "", "write the file here (default: standard output)")
	}
	if r.cmd == "export" {
		fl.Int64Var(&r.since, "since", 0, "add a consistency proof from this tree size (of a checkpoint you saved)")
	}
}

// argsProblem returns what is wrong with the positional arguments and the
// required flags of r's subcommand, or "".
func (r *clientRun) argsProblem() string {
	cmd := r.cmd
	takesID := cmd == "status" || cmd == "attestation" || cmd == "export"
	switch {
	case takesID && len(r.positional) != 1:
		return "want one forget id"
	case !takesID && len(r.positional) != 0:
		return fmt.Sprintf("unexpected argument %q", r.positional[0])
	case cmd == "encrypt" && r.kind == "":
		return "--kind is required"
	case cmd == "encrypt" && len(r.subjects) == 0 && len(r.parents) == 0 && len(r.leases) == 0:
		return "give at least one --subject, --parent or --lease"
	case cmd == "forget" && len(r.subjects) != 1:
		return "give one --subject"
	case cmd == "reinstate" && len(r.subjects)+min(len(r.subjectFile), 1) != 1:
		return "give one --subject-file or one --subject"
	case cmd == "forget" && r.dryRun && r.yes:
		return "--dry-run changes nothing: --yes has nothing to confirm"
	}
	return ""
}

// fieldProblem returns what is wrong with --field, a name the answer of
// r's subcommand does not have, or "".
func (r *clientRun) fieldProblem() string {
	if r.field == "" {
		return ""
	}
	var zero any
	switch {
	case r.cmd == "encrypt":
		zero = client.EncryptResponse{}
	case r.cmd == "forget" && r.dryRun:
		zero = client.Preview{}
	case r.cmd == "reinstate":
		zero = client.Reinstatement{}
	default:
		zero = client.Forget{}
	}
	if names := jsonFields(reflect.TypeOf(zero)); !slices.Contains(names, r.field) {
		return fmt.Sprintf("--field %q: the answer has the fields %s", r.field, strings.Join(names, ", "))
	}
	return ""
}

// usage prints a usage error of r's subcommand and returns exitUsage.
func (r *clientRun) usage(format string, a ...any) int {
	fmt.Fprintf(r.stderr, "shredd %s: %s\n%s\n", r.cmd, fmt.Sprintf(format, a...), clientUsage)
	return exitUsage
}

// emit prints an answer: as JSON, or only its --field.
func (r *clientRun) emit(v any) int {
	if r.field == "" {
		return printJSON(r.stdout, v)
	}
	return printField(r.stdout, r.stderr, v, r.field)
}

// fail prints an error of the call and returns its exit status. The
// client's errors name the call ("shredd: POST /v1/decrypt: 410 shredded:
// ...").
func (r *clientRun) fail(err error) int {
	fmt.Fprintln(r.stderr, err)
	if client.IsShredded(err) {
		return exitShredded
	}
	return exitFailed
}

// encrypt runs `shredd encrypt`: the plaintext from standard input.
func (r *clientRun) encrypt(ctx context.Context) int {
	pt, err := readStdin(r.stdin)
	if err != nil {
		return r.usage("%v", err)
	}
	defer clear(pt)
	out, err := r.c.Encrypt(ctx, client.EncryptRequest{Subjects: r.subjects, Parents: r.parents, Leases: r.leases, Kind: r.kind, Plaintext: pt, Context: []byte(r.aad),
		Unit: r.unit, Independent: r.independent, IndependentOf: r.independentOf})
	if err != nil {
		return r.fail(err)
	}
	return r.emit(out)
}

// decrypt runs `shredd decrypt`: the ciphertext from --ciphertext or
// standard input, the plaintext to standard output, then the lease
// released unless --keep-lease.
func (r *clientRun) decrypt(ctx context.Context) int {
	ciphertext := r.ciphertext
	if ciphertext == "" {
		b, err := readStdin(r.stdin)
		if err != nil {
			return r.usage("%v", err)
		}
		ciphertext, err = ciphertextOf(b)
		if err != nil {
			return r.usage("%v", err)
		}
	}
	if ciphertext == "" {
		return r.usage("no ciphertext: give --ciphertext or write it to standard input")
	}
	out, err := r.c.Decrypt(ctx, client.DecryptRequest{Ciphertext: ciphertext, Context: []byte(r.aad), Unit: r.unit})
	if err != nil {
		return r.fail(err)
	}
	defer clear(out.Plaintext)
	code := exitOK
	if _, err := r.stdout.Write(out.Plaintext); err != nil {
		fmt.Fprintf(r.stderr, "shredd decrypt: %v\n", err)
		code = exitFailed
	}
	// The lease says this process holds the plaintext; once it is
	// written out (or failed to be), the process holds it no more, and a
	// forget of the subject must not wait out the lease's TTL for it.
	if r.keepLease {
		fmt.Fprintf(r.stderr, "shredd decrypt: lease %s kept until %s\n", out.Lease.ID, out.Lease.ExpiresAt.UTC().Format(time.RFC3339))
		return code
	}
	if _, err := r.c.ReleaseLease(ctx, out.Lease.ID); err != nil {
		// A warning, not a failure: the plaintext was delivered, and a
		// non-zero status would make a script retry the decrypt (taking
		// another lease). The lease ends at its expiry anyway.
		fmt.Fprintf(r.stderr, "shredd decrypt: warning: lease %s not released, it ends at %s: %v\n",
			out.Lease.ID, out.Lease.ExpiresAt.UTC().Format(time.RFC3339), err)
	}
	return code
}

// forget runs `shredd forget`: the dry run, or the forget, confirmed on a
// terminal unless --yes.
func (r *clientRun) forget(ctx context.Context) int {
	subject := r.subjects[0]
	if r.dryRun {
		p, err := r.c.ForgetPreview(ctx, subject)
		if err != nil {
			return r.fail(err)
		}
		return r.emit(p)
	}
	if f, ok := r.stdin.(*os.File); ok && !r.yes && isTerminal(f) {
		p, err := r.c.ForgetPreview(ctx, subject)
		if err != nil {
			return r.fail(err)
		}
		if !confirmForget(f, r.stderr, p) {
			fmt.Fprintln(r.stderr, "shredd forget: not confirmed; nothing was forgotten")
			return exitFailed
		}
	}
	f, err := r.c.Forget(ctx, subject)
	if err != nil {
		return r.fail(err)
	}
	return r.emit(f)
}

// reinstate runs `shredd reinstate`: the subject from --subject-file
// (exactly its bytes, but one final LF, which editors and echo add) or
// --subject.
func (r *clientRun) reinstate(ctx context.Context) int {
	var subject string
	if r.subjectFile != "" {
		var b []byte
		var err error
		if r.subjectFile == "-" {
			b, err = io.ReadAll(io.LimitReader(r.stdin, 1<<20))
		} else {
			b, err = os.ReadFile(r.subjectFile)
		}
		if err != nil {
			return r.usage("--subject-file: %v", err)
		}
		b, _ = bytes.CutSuffix(b, []byte("\n"))
		subject = string(b)
		clear(b)
	} else {
		subject = r.subjects[0]
	}
	if subject == "" {
		return r.usage("the subject is empty")
	}
	rs, err := client.NewSubjects(r.c).Reinstate(ctx, subject, r.reason)
	if err != nil {
		return r.fail(err)
	}
	return r.emit(rs)
}

// status runs `shredd status FORGET_ID`.
func (r *clientRun) status(ctx context.Context) int {
	f, err := r.c.GetForget(ctx, r.positional[0])
	if err != nil {
		return r.fail(err)
	}
	return r.emit(f)
}

// download runs `shredd attestation|export|checkpoint`: the file to --out
// or standard output.
func (r *clientRun) download(ctx context.Context) int {
	var b []byte
	var err error
	switch r.cmd {
	case "attestation":
		b, err = r.c.Attestation(ctx, r.positional[0])
	case "export":
		b, err = r.c.Export(ctx, r.positional[0], r.since)
	default:
		b, err = r.c.Checkpoint(ctx)
	}
	if err != nil {
		return r.fail(err)
	}
	if r.out != "" {
		err = os.WriteFile(r.out, b, 0o644)
	} else {
		_, err = r.stdout.Write(b)
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "shredd %s: %v\n", r.cmd, err)
		return exitFailed
	}
	return exitOK
}

// parseInterleaved parses fl from args, where the positional arguments may
// stand before, between or after the flags, and returns them in order.
func parseInterleaved(fl *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fl.Parse(args); err != nil {
			return nil, err
		}
		if fl.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fl.Arg(0))
		args = fl.Args()[1:]
	}
}

// newClient makes the client of the server at addr ("host:port" means
// http://host:port), with the token and the CA the flags and environment
// name.
func newClient(addr, tokenPath, caCert string, getenv func(string) string) (*client.Client, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	token, err := clientToken(tokenPath, getenv)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caCert != "" {
		pem, err := os.ReadFile(caCert)
		if err != nil {
			return nil, usageError{fmt.Errorf("--cacert: %w", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError{fmt.Errorf("--cacert %s holds no PEM certificate", caCert)}
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c, err := client.New(addr, token, client.WithHTTPClient(&http.Client{Transport: tr}), client.WithUserAgent("shredd-cli/"+api.ReadBuildInfo().Version))
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr: %w", err)}
	}
	return c, nil
}

// clientToken finds the bearer token: the file tokenPath, else SHREDD_TOKEN,
// else the admin token file of the data directory if it exists.
func clientToken(tokenPath string, getenv func(string) string) (string, error) {
	if tokenPath == "" {
		if v := strings.TrimSpace(getenv("SHREDD_TOKEN")); v != "" {
			return v, nil
		}
		dir := "./shredd-data"
		if v := getenv("SHREDD_DATA_DIR"); v != "" {
			dir = v
		}
		tokenPath = filepath.Join(dir, node.TokenFile)
		if _, err := os.Stat(tokenPath); err != nil {
			return "", usageError{fmt.Errorf("no token: give --token-file or SHREDD_TOKEN (there is no admin token at %s)", tokenPath)}
		}
	}
	b, err := os.ReadFile(tokenPath)
	if err != nil {
		return "", usageError{fmt.Errorf("token: %w", err)}
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", usageError{fmt.Errorf("token file %s is empty", tokenPath)}
	}
	return t, nil
}

func readStdin(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxStdin+1))
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if len(b) > maxStdin {
		clear(b)
		return nil, fmt.Errorf("standard input is over %d bytes", maxStdin)
	}
	return b, nil
}

// ciphertextOf reads a ciphertext from standard input: the text itself
// (surrounding whitespace ignored), or the JSON answer of shredd encrypt,
// whose ciphertext field it takes, so that encrypt's output feeds decrypt
// as it is.
func ciphertextOf(in []byte) (string, error) {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || in[0] != '{' {
		return string(in), nil
	}
	var v struct {
		Ciphertext string `json:"ciphertext"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return "", fmt.Errorf("standard input starts with '{' but is not JSON: %v", err)
	}
	if v.Ciphertext == "" {
		return "", errors.New("the JSON on standard input has no ciphertext field")
	}
	return v.Ciphertext, nil
}

// confirmForget asks on the terminal whether to forget, showing what the
// dry run found, and reports whether the answer was yes.
func confirmForget(tty *os.File, w io.Writer, p client.Preview) bool {
	if p.AlreadyForgotten {
		fmt.Fprintln(w, "This subject is already forgotten: the forget will answer the existing one.")
	} else {
		more := ""
		if p.Truncated {
			more = " (at least)"
		}
		fmt.Fprintf(w, "Forgetting this subject destroys its key for good: %d artifacts%s become unreadable\n"+
			"(%d direct, %d derived, %d shared with other subjects, %d held in plaintext by holders who must purge them).\n",
			p.Counts.Total, more, p.Counts.Direct, p.Counts.Derived, p.Counts.Collateral, p.Counts.PlaintextHeld)
	}
	fmt.Fprint(w, "Forget it? Type yes to confirm: ")
	line, _ := bufio.NewReader(io.LimitReader(tty, 1024)).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// jsonFields returns the JSON names of the fields of struct type t (of its
// embedded structs too).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// printField prints the field of v's JSON: a string as it is, anything
// else as JSON, then a newline. A field the answer left out (omitted when
// empty) prints as an empty line.
func printField(w, stderr io.Writer, v any, field string) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(stderr, "shredd:", err)
		return exitFailed
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		fmt.Fprintln(stderr, "shredd:", err)
		return exitFailed
	}
	raw, ok := m[field]
	var s string
	switch {
	case !ok:
	case len(raw) > 0 && raw[0] == '"':
		_ = json.Unmarshal(raw, &s)
	default:
		s = string(raw)
	}
	if _, err := fmt.Fprintln(w, s); err != nil {
		return exitFailed
	}
	return exitOK
}

func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitFailed
	}
	return exitOK
}

const clientUsage = `usage: shredd encrypt --kind K --subject S [--subject S ...] [--parent ID ...] [--lease ID ...] [--context STR]
                      [--unit U] [--independent | --independent-of ID ...] < plaintext
       shredd decrypt [--context STR] [--ciphertext CT] [--keep-lease] [--unit U] < ciphertext
         writes the plaintext, then releases the decrypt's lease so that a forget need not wait
         for it; --keep-lease keeps it and prints its id on stderr (release it with
         POST /v1/leases/{id}/release). A failed release is a warning on stderr, not an error:
         the exit status stays 0 and the lease ends at its expiry (--lease-ttl of the server).
       A decrypt is a read of its token until the lease expires, released or not: an encrypt of
         the same token (and of the same --unit, or where either has none) must name it
         (--lease ID) or declare it independent (--independent-of ID, --independent), or it is
         refused (409 undeclared_derivation, listing the lease ids).
       shredd encrypt ... --field ciphertext | shredd decrypt   (decrypt also reads encrypt's JSON as it is)
       shredd forget --subject S [--dry-run] [--yes]
         --dry-run changes nothing and prints what the forget would make unreadable. On a terminal,
         a real forget shows that and asks for confirmation, unless --yes.
       shredd reinstate --subject-file FILE | --subject S [--reason R]
         gives a forgotten subject whose forget is erased a new key generation (an admin token);
         the old generation's data stays erased. --subject-file keeps the id off the command line.
       shredd status FORGET_ID
         encrypt, forget, reinstate and status print JSON; --field NAME prints one field of it
       shredd attestation FORGET_ID [--out FILE]
       shredd export FORGET_ID [--since N] [--out FILE]
       shredd checkpoint [--out FILE]
common flags: --addr URL (SHREDD_URL, default http://127.0.0.1:7750), --token-file FILE (else SHREDD_TOKEN,
  else ./shredd-data/admin.token), --cacert FILE, --timeout 1m
exit status: 0 ok, 1 refused by the server or unreachable, 2 usage, 3 shredded (410: the data is erased)`
