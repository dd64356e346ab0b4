// Command shredd is the crypto-shredding key management service.
//
//	shredd [serve] [flags]   run the service (the default; embedded root store in ./shredd-data)
//	shredd token ...         create, list and revoke bearer tokens
//	shredd encrypt|decrypt|forget|status ...   call a running server
//	shredd keygen [--out DIR]  write an attestation key pair
//	shredd backup|restore ... an online backup of the database; put one back
//	shredd verify FILE ...   check an erasure attestation offline
//	shredd version           print the version
//
// Only this package reads flags and the environment, picks the backends and
// exits the process; internal/node opens a data directory's stack. The load
// tool is a command of its own, cmd/shredd-bench.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Version is the release of this build.
var Version = "0.1.0-dev"

func main() {
	// The signal handlers stay installed until the process exits: a second
	// SIGTERM during the graceful shutdown must not kill it with the default
	// action (stopping the handlers before os.Exit left that window open).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// Main runs one shredd command and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCmd(ctx, args, stderr, getenv)
	case "token":
		return tokenCmd(ctx, args, stdout, stderr, getenv)
	case "encrypt":
		return clientCmd(ctx, cmd, args, os.Stdin, stdout, stderr, getenv)
	case "decrypt":
		return clientCmd(ctx, cmd, args, os.Stdin, stdout, stderr, getenv)
	case "forget":
		return clientCmd(ctx, cmd, args, os.Stdin, stdout, stderr, getenv)
	case "status", "attestation", "export", "checkpoint":
		return clientCmd(ctx, cmd, args, os.Stdin, stdout, stderr, getenv)
	case "keygen":
		return keygenCmd(args, stdout, stderr)
	case "backup":
		return backupCmd(ctx, args, stdout, stderr, getenv)
	case "restore":
		return restoreCmd(ctx, args, stdout, stderr, getenv)
	case "verify":
		return verifyCmd(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "shredd", Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "shredd: unknown command %q\n%s\n", cmd, usage)
	return 2
}

const usage = `usage: shredd [serve] [flags]   run the service (see shredd serve -h)
       shredd token create|list|revoke   administer bearer tokens
       shredd encrypt --kind K --subject S [--parent ID ...] [--context STR] < plaintext
       shredd decrypt [--context STR] [--ciphertext CT] < ciphertext
       shredd attestation FORGET_ID [--out FILE]   the signed erasure attestation
       shredd export FORGET_ID [--since N] [--out FILE]   the regulator export (tar.gz)
       shredd checkpoint [--out FILE]   the transparency log's signed checkpoint
       shredd forget --subject S   forget a subject; prints the pending-erasure token
       shredd status FORGET_ID     print a forget
                                (--addr URL, --token-file FILE; exit 3 when the data is shredded)
       shredd keygen [--out DIR]   write a new attestation key pair (attestation.key, attestation.pub)
       shredd backup [--data-dir D] --out FILE | --dir DIR   an online, consistent backup of the database
       shredd backup list --dir DIR   the backups in DIR with their root versions and log sizes
       shredd restore [--data-dir D] BACKUP   put a backup in place of the database (server stopped)
       shredd verify FILE --key PUB.pem --subject ID --salt HEX   check an erasure attestation offline
                                (exit 1 when a check fails)
       shredd version           print the version`
