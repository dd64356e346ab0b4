package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
)

// isGzip reports whether the file at path starts with the gzip magic: a
// regulator export rather than an attestation file.
func isGzip(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [2]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && magic == [2]byte{0x1f, 0x8b}
}

type exportArgs struct {
	key, logKey, saved, subject, salt string
	witness                           witnessFlags
}

// verifyExport runs `shredd verify EXPORT.tar.gz`: bundle.Verify with the
// keys the verifier trusts.
func verifyExport(path string, a exportArgs, stdout io.Writer, usage func(string, ...any) int) int {
	if a.logKey == "" {
		return usage("--log-key is required for an export: the log's verifier key, obtained from the operator")
	}
	var opts bundle.Options
	pubPEM, err := readLimited(a.key)
	if err != nil {
		return usage("--key: %v", err)
	}
	vkey, err := readLimited(a.logKey)
	if err != nil {
		return usage("--log-key: %v", err)
	}
	if opts.WitnessKeys, opts.WitnessesRequired, err = a.witness.keyFiles(); err != nil {
		return usage("%v", err)
	}
	if a.saved != "" {
		if opts.Saved, err = readLimited(a.saved); err != nil {
			return usage("--checkpoint: %v", err)
		}
	}
	if (a.subject == "") != (a.salt == "") {
		return usage("give both --subject and --salt, or neither")
	}
	if a.subject != "" {
		opts.Subject = a.subject
		if opts.Salt, err = attest.ParseSalt(a.salt); err != nil {
			return usage("--salt: want the %d hex digits the forget returned", 2*attest.SaltSize)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return usage("%v", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, bundle.MaxTotalSize+1))
	f.Close()
	if err != nil {
		return usage("%v", err)
	}
	fmt.Fprintf(stdout, "export       %s\n", path)
	// bundle.CheckExport is the one strict reader of the spec: the key
	// files, the archive, then every check, in order; its reason code is
	// the one the page and the clients give for the same bytes.
	rep, err := bundle.CheckExport(data, pubPEM, vkey, opts)
	if errors.Is(err, bundle.ErrUsage) {
		return usage("%v", err)
	}
	if err != nil {
		reason := bundle.Reason(err)
		fmt.Fprintf(stdout, "FAIL  %-13s%v\n", reason, strings.TrimPrefix(err.Error(), "bundle: "))
		fmt.Fprintf(stdout, "NOT VERIFIED: %s\n", reason)
		return exitFailed
	}
	b, err := bundle.ReadBytes(data)
	if err != nil {
		return exitFailed // CheckExport read it
	}
	k, _ := bundle.CheckPublicKeyFile(pubPEM) // CheckExport read both
	opts.AttestationKey = k
	opts.LogKey, _ = bundle.CheckLogKeyFile(vkey)
	var out bytes.Buffer
	// The keys in the archive are not used; say when they differ from the
	// ones given, since a regulator comparing files by hand would use them.
	if p, err := bundle.CheckPublicKeyFile(b.AttestationPub); err != nil || !bytes.Equal(p, opts.AttestationKey) {
		fmt.Fprintf(&out, "note  keys         the archive's %s is not the --key given; the given key was used\n", bundle.FileAttestationPub)
	}
	if l, err := bundle.CheckLogKeyFile(b.LogKey); err != nil || l != opts.LogKey {
		fmt.Fprintf(&out, "note  keys         the archive's %s is not the --log-key given; the given key was used\n", bundle.FileLogKey)
	}
	fmt.Fprintf(&out, "ok    attestation  signed by the service key, claim and conditions valid, forget %s\n", rep.Forget)
	fmt.Fprintf(&out, "ok    checkpoint   signed by the log key, origin %s, tree size %d\n", rep.Origin, rep.TreeSize)
	if w := rep.Witnessed; w != nil {
		fmt.Fprintf(&out, "ok    witnesses    %s\n", witnessSummary(w, cmp.Or(opts.WitnessesRequired, len(opts.WitnessKeys))))
	}
	for _, e := range rep.Entries {
		fmt.Fprintf(&out, "ok    entry        %s: signed, included in the checkpoint's tree\n", e)
	}
	fmt.Fprintf(&out, "ok    key          %s\n", rep.KeyLink)
	if rep.SubjectChecked {
		fmt.Fprintf(&out, "ok    subject      the subject id and salt open commitment %s\n", shortHex(rep.Commitment))
	} else {
		fmt.Fprintf(&out, "-     subject      not checked (no --subject and --salt)\n")
	}
	if rep.Consistent != "" {
		fmt.Fprintf(&out, "ok    consistency  the log %s\n", rep.Consistent)
	} else {
		fmt.Fprintf(&out, "-     consistency  not checked (no --checkpoint saved earlier)\n")
	}
	fmt.Fprintf(&out, "VERIFIED: forget %s is attested erased and every step of it is in log %s\n", rep.Forget, rep.Origin)
	if _, err := stdout.Write(out.Bytes()); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return exitFailed
	}
	return exitOK
}
