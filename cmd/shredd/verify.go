package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/cmd/shredd/node"
)

// verifyCmd runs `shredd verify FILE --key PUB.pem --subject ID --salt HEX`:
// the offline check of an attestation file, with no access to the service.
// Exit 0 only when every check holds, 1 when one fails (the report says
// which), 2 on usage errors and unreadable inputs (nothing was checked).
func verifyCmd(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd verify", flag.ContinueOnError)
	fl.SetOutput(stderr)
	keyPath := fl.String("key", "", "the service's attestation public key (PEM, "+node.AttestationPubFile+")")
	subject := fl.String("subject", "", "the subject id the forget was for")
	subjectFile := fl.String("subject-file", "", "read the subject id from this file instead (keeps it off the command line)")
	saltHex := fl.String("salt", "", "the salt returned by the forget (64 hex digits)")
	saltFile := fl.String("salt-file", "", "read the salt from this file instead (keeps it off the command line)")
	logKeyPath := fl.String("log-key", "", "for an export: the transparency log's verifier key ("+node.LogVKeyFile+")")
	var wf witnessFlags
	wf.register(fl)
	savedPath := fl.String("checkpoint", "", "for an export: a checkpoint of the log saved earlier, which the export's log must extend")
	fl.Usage = func() {
		fmt.Fprintln(stderr, verifyUsage)
		fl.PrintDefaults()
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shredd verify: %s\n%s\n", fmt.Sprintf(format, a...), verifyUsage)
		return exitUsage
	}
	// The attestation file may come before or after the flags.
	files, err := parseInterleaved(fl, args)
	if err != nil {
		return exitUsage
	}
	if len(files) != 1 {
		return usage("want one attestation file")
	}
	if *keyPath == "" {
		return usage("--key is required")
	}
	// An export is a gzip file; a file given with --log-key or
	// --checkpoint is read as an export whatever its first bytes, so that
	// a broken archive is refused as one (docs/transparency.md).
	export := isGzip(files[0]) || *logKeyPath != "" || *savedPath != ""
	// The subject and the salt are optional (both or neither): without
	// them the commitment is not opened, and the report says so.
	subj, err := flagOrFile("subject", *subject, *subjectFile)
	if err != nil && (*subject != "" || *subjectFile != "") {
		return usage("%v", err)
	}
	saltText, err := flagOrFile("salt", *saltHex, *saltFile)
	if err != nil && (*saltHex != "" || *saltFile != "") {
		return usage("%v", err)
	}
	if export {
		return verifyExport(files[0], exportArgs{key: *keyPath, logKey: *logKeyPath, saved: *savedPath, subject: subj, salt: saltText, witness: wf}, stdout, usage)
	}
	if len(wf.keys) > 0 || wf.required >= 0 {
		return usage("--witness and --witnesses-required apply to an export's checkpoint, not to an attestation file")
	}
	if (subj == "") != (saltText == "") {
		return usage("give both --subject and --salt, or neither (an empty subject id is none)")
	}
	var salt []byte
	if saltText != "" {
		if salt, err = attest.ParseSalt(saltText); err != nil {
			return usage("--salt: want the %d hex digits the forget returned, nothing else", 2*attest.SaltSize)
		}
	}
	keyFile, err := readLimited(*keyPath)
	if err != nil {
		return usage("--key: %v", err)
	}
	data, err := readAttestation(files[0])
	if err != nil {
		return usage("%v", err)
	}
	// bundle.CheckAttestation is the one strict reader of a bare
	// attestation (docs/transparency.md §10b): the same rules and reason
	// codes as an export's attestation.json, in every reader.
	r := &verifyReport{w: stdout}
	fmt.Fprintf(stdout, "attestation  %s\n", files[0])
	st, err := bundle.CheckAttestation(data, keyFile, subj, salt)
	if st != nil { // the signature and the statement hold
		pub, _ := bundle.CheckPublicKeyFile(keyFile)
		r.ok("signature", "Ed25519 by key id %s", attest.KeyID(pub))
		r.ok("statement", "in-toto Statement v1, predicate %s", st.PredicateType)
		r.ok("claim", "%q, %d of %d conditions ok", st.Predicate.Claim, len(attest.Conditions()), len(attest.Conditions()))
	}
	if err != nil {
		reason := bundle.Reason(err)
		r.fail(reason, errors.New(strings.TrimPrefix(err.Error(), "bundle: ")))
		if st != nil {
			r.details(st)
		}
		fmt.Fprintf(stdout, "\nNOT VERIFIED: %s\n", reason)
		return exitFailed
	}
	if salt != nil {
		r.ok("subject", "the subject id and salt open commitment %s", shortHex(st.Commitment()))
	} else {
		fmt.Fprintf(stdout, "-     subject      not checked (no --subject and --salt)\n")
	}
	r.details(st)
	return r.result(st)
}

// verifyReport prints the checks, one per line, and remembers whether any failed.
type verifyReport struct {
	w      io.Writer
	failed []string
}

func (r *verifyReport) ok(check, format string, a ...any) {
	fmt.Fprintf(r.w, "ok    %-13s%s\n", check, fmt.Sprintf(format, a...))
}

func (r *verifyReport) fail(check string, err error) {
	r.failed = append(r.failed, check)
	msg := strings.TrimPrefix(err.Error(), "attest: ")
	fmt.Fprintf(r.w, "FAIL  %-13s%s\n", check, msg)
}

// details prints what the statement says, verified or not.
func (r *verifyReport) details(st *attest.Statement) {
	p := &st.Predicate
	if p.Forget == "" {
		return
	}
	w := r.w
	fmt.Fprintf(w, "\nforget       %s\n", p.Forget)
	t := p.Timeline
	fmt.Fprintf(w, "timeline     requested %s, committed %s, shredded %s, erased %s\n",
		verifyStamp(t.Requested), verifyStamp(t.Committed), verifyStamp(t.Shredded), verifyStamp(t.Erased))
	k := p.KeyEvidence
	versions := make([]string, len(k.RetiredRootVersions))
	for i, v := range k.RetiredRootVersions {
		versions[i] = fmt.Sprint(v)
	}
	fmt.Fprintf(w, "root store   %s", k.RootStore)
	if k.RootKeyConfig != nil {
		fmt.Fprintf(w, " (key %s)", k.RootKeyConfig.Name)
	}
	fmt.Fprintf(w, ", epoch %d, root versions destroyed: %s\n", k.Epoch, dash(strings.Join(versions, ", ")))
	sealed, acked := 0, 0
	for _, a := range p.Artifacts {
		switch a.ClosedBy {
		case attest.ClosedSealedKeyDestroyed:
			sealed++
		case attest.ClosedHolderAck:
			acked++
		}
	}
	fmt.Fprintf(w, "artifacts    %d: %d sealed (their key is destroyed), %d plaintext-held, purged with a signed holder ack\n", len(p.Artifacts), sealed, acked)
	holders := make([]string, len(p.HolderAcks))
	for i, h := range p.HolderAcks {
		holders[i] = fmt.Sprintf("%s (%d artifacts)", h.Holder, len(h.Artifacts))
	}
	fmt.Fprintf(w, "holder acks  %s\n", dash(strings.Join(holders, ", ")))
	fmt.Fprintln(w, "conditions")
	for _, c := range p.Conditions {
		fmt.Fprintf(w, "  %-21s %-8s %s\n", c.Name, c.Status, c.Evidence)
	}
	fmt.Fprintln(w, "residuals (what this attestation cannot rule out)")
	for _, x := range p.Residuals {
		fmt.Fprintf(w, "  %-21s %s\n", x.Kind, x.Description)
	}
}

func (r *verifyReport) result(st *attest.Statement) int {
	if len(r.failed) > 0 {
		fmt.Fprintf(r.w, "\nNOT VERIFIED: %s failed\n", strings.Join(r.failed, ", "))
		return exitFailed
	}
	fmt.Fprintf(r.w, "\nVERIFIED: the subject's data was %s (forget %s, %s)\n", st.Predicate.Claim, st.Predicate.Forget, verifyStamp(st.Predicate.Timeline.Erased))
	return exitOK
}

func verifyStamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func shortHex(hex string) string {
	if len(hex) > 16 {
		return hex[:16] + "..."
	}
	return hex
}

// flagOrFile returns the value of --name, or the content of --name-file
// without one final line feed (so that a subject id ending in a line break
// can be given: write it with one more); exactly one must be given.
func flagOrFile(name, value, file string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("give --%s or --%s-file, not both", name, name)
	case file != "":
		b, err := readLimited(file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %v", name, err)
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	case value == "":
		return "", fmt.Errorf("--%s (or --%s-file) is required", name, name)
	}
	return value, nil
}

// readAttestation reads an attestation file, up to attest.MaxEnvelopeSize.
func readAttestation(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, attest.MaxEnvelopeSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(b) > attest.MaxEnvelopeSize {
		return nil, fmt.Errorf("%s: over %d bytes, not an attestation", path, attest.MaxEnvelopeSize)
	}
	return b, nil
}

const verifyUsage = `usage: shredd verify FILE --key PUB.pem [--subject ID --salt HEX]
       shredd verify EXPORT.tar.gz --key PUB.pem --log-key LOG.vkey [--subject ID --salt HEX] [--checkpoint SAVED]
              [--witness VKEY ... [--witnesses-required K]]
       checks an erasure attestation offline: its signature under the service's public key,
       its structure and claim, the five conditions of erasure, and that the subject id and
       salt open its commitment (--subject-file and --salt-file keep them off the command line).
       On a regulator export it also checks the log checkpoint's signature, every entry's
       signature and inclusion proof, that the entries are this forget's, and that the log
       extends a checkpoint saved earlier, and with --witness that the checkpoint carries
       valid cosignatures of K of the witnesses given (default: all of them).
       exit 0: verified; 1: a check failed (the report says which); 2: usage error or unreadable input`
