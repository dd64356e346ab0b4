package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/cmd/shredd/node"
)

// maxKeyFile bounds what is read from a key file.
const maxKeyFile = 64 << 10

// keygenCmd runs `shredd keygen [--out DIR]`: a new Ed25519 attestation key
// pair in DIR, never overwriting one.
func keygenCmd(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd keygen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("out", ".", "directory to write "+node.AttestationKeyFile+" and "+node.AttestationPubFile+" to (created if missing)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, keygenUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "shredd keygen: unexpected argument %q\n%s\n", fl.Arg(0), keygenUsage)
		return exitUsage
	}
	_, pub, err := node.CreateAttestationKey(*out)
	if err != nil {
		fmt.Fprintln(stderr, "shredd keygen:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\nkey id %s\n", filepath.Join(*out, node.AttestationPubFile), attest.KeyID(pub))
	fmt.Fprintf(stderr, "wrote %s (private, mode 0600: keep it secret) and %s (public: give it to verifiers)\n",
		filepath.Join(*out, node.AttestationKeyFile), filepath.Join(*out, node.AttestationPubFile))
	return exitOK
}

// readLimited reads a small file (a key), refusing one over maxKeyFile.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: over %d bytes, not a key file", path, maxKeyFile)
	}
	return b, nil
}

const keygenUsage = `usage: shredd keygen [--out DIR]
       writes a new Ed25519 attestation key pair: DIR/attestation.key (private, mode 0600)
       and DIR/attestation.pub (public, for shredd verify --key); never overwrites`
