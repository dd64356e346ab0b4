// Command shredd is the crypto-shredding key management service.
//
//	shredd [serve] [flags]   run the service (the default; embedded root store in ./shredd-data)
//	shredd token ...         create, list and revoke bearer tokens
//	shredd encrypt|decrypt|forget|status ...   call a running server
//	shredd keygen [--out DIR]  write an attestation key pair
//	shredd backup|restore ... an online backup of the database; put one back
//	shredd ledger check|repair  the forget ledger's damage, and its repair (server stopped)
//	shredd reregister [FILE...] register again the artifacts a restore lost, from their envelopes
//	shredd verify FILE ...   check an erasure attestation offline
//	shredd witness ...       a C2SP tlog-witness that cosigns a log's checkpoints
//	shredd completion bash|zsh  a shell completion script
//	shredd version           print the version and the commit (also --version)
//
// shredd -h lists the commands; shredd CMD -h (or shredd help CMD) shows
// one command's flags (cli.go).
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
	} else if len(args) > 0 {
		switch args[0] {
		case "-h", "--h", "-help", "--help":
			writeUsage(stdout)
			return 0
		case "-version", "--version":
			fmt.Fprint(stdout, versionText())
			return 0
		}
	}
	if cmd == "help" {
		if len(args) == 0 || helpRequested(args[:1]) {
			writeUsage(stdout)
			return 0
		}
		return commandHelp(ctx, args[0], args[1:], stdout, getenv)
	}
	if cmd != "__complete" && helpRequested(args) {
		if _, ok := findCommand(cmd); ok {
			return commandHelp(ctx, cmd, args, stdout, getenv)
		}
	}
	switch cmd {
	case "serve":
		return serveCmd(ctx, args, stderr, getenv)
	case "token":
		return tokenCmd(ctx, args, stdout, stderr, getenv)
	case "encrypt", "decrypt", "forget", "reinstate", "status", "attestation", "export", "checkpoint":
		return clientCmd(ctx, cmd, args, os.Stdin, stdout, stderr, getenv)
	case "keygen":
		return keygenCmd(args, stdout, stderr)
	case "backup":
		return backupCmd(ctx, args, stdout, stderr, getenv)
	case "restore":
		return restoreCmd(ctx, args, stdout, stderr, getenv)
	case "ledger":
		return ledgerCmd(ctx, args, stdout, stderr, getenv)
	case "wal":
		return walCmd(ctx, args, stdout, stderr, getenv)
	case "reregister":
		return reregisterCmd(ctx, args, os.Stdin, stdout, stderr, getenv)
	case "verify":
		return verifyCmd(args, stdout, stderr)
	case "witness":
		return witnessCmd(ctx, args, stdout, stderr)
	case "completion":
		return completionCmd(args, stdout, stderr)
	case "__complete":
		return completeCmd(ctx, args, stdout, getenv)
	case "version":
		fmt.Fprint(stdout, versionText())
		return 0
	}
	fmt.Fprintf(stderr, "shredd: unknown command %q\n", cmd)
	writeUsage(stderr)
	return 2
}
