package main

// The habits of the command line: help for the command and every
// subcommand (-h, --help, shredd help CMD; exit 0, on stdout), the version
// and commit from the build info (shredd version, shredd --version), and
// shell completion (shredd completion bash|zsh, which call back into
// shredd __complete so that the candidates come from the flags as they are
// defined, not from a copy of them).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api"
)

// command is one subcommand, as the help lists it.
type command struct {
	name, args, summary string
}

// commands are the subcommands, in the order the help lists them.
var commands = []command{
	{"serve", "[flags]", "run the service (the default command; every flag also reads SHREDD_<FLAG>)"},
	{"token", "create|list|revoke", "administer the bearer tokens of a data directory"},
	{"encrypt", "--kind K --subject S < plaintext", "seal data through a running server"},
	{"decrypt", "[--ciphertext CT] < ciphertext", "open a ciphertext (or the JSON that encrypt prints)"},
	{"forget", "--subject S [--dry-run] [--yes]", "forget a subject; --dry-run shows what it would make unreadable"},
	{"reinstate", "--subject-file FILE | --subject S [--reason R]", "give a forgotten subject (its forget erased) a new key generation"},
	{"status", "FORGET_ID", "print a forget"},
	{"attestation", "FORGET_ID [--out FILE]", "the signed erasure attestation of an erased forget"},
	{"export", "FORGET_ID [--since N] [--out FILE]", "the regulator export (tar.gz) of an erased forget"},
	{"checkpoint", "[--out FILE]", "the transparency log's signed checkpoint"},
	{"keygen", "[--out DIR]", "write a new attestation key pair"},
	{"backup", "[--out FILE | --dir DIR] | list --dir DIR", "an online backup of the database with its manifest; list backups"},
	{"restore", "BACKUP", "check a backup against its manifest and put it in place of the database (server stopped)"},
	{"ledger", "check|repair [--accept-loss]", "what of the forget ledger is damaged; repair it (server stopped)"},
	{"wal", "check|accept-loss", "whether every acknowledged registration is held; record an accepted loss (server stopped)"},
	{"reregister", "[--context STR] [FILE ...]", "register again, from their envelopes, the artifacts a restore lost"},
	{"verify", "FILE --key PUB.pem --subject ID --salt HEX", "check an attestation or an export offline"},
	{"witness", "--key FILE --log VKEY --state DIR | keygen", "a witness that cosigns the transparency log's checkpoints (C2SP tlog-witness)"},
	{"completion", "bash|zsh", "print a shell completion script"},
	{"version", "", "print the version and the commit"},
	{"help", "[COMMAND]", "print this help, or a command's"},
}

// subcommands of the commands that have some, for help and completion.
var subcommands = map[string][]string{
	"token":      {"create", "list", "revoke"},
	"backup":     {"list"},
	"ledger":     {"check", "repair"},
	"wal":        {"check", "accept-loss"},
	"completion": {"bash", "zsh"},
	"witness":    {"keygen"},
}

func findCommand(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// writeUsage writes the top-level help: every subcommand with its
// arguments and what it does.
func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: shredd <command> [flags]        (no command: shredd serve)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  shredd %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `"shredd <command> -h" shows a command's flags. The client commands (encrypt ... checkpoint)`)
	fmt.Fprintln(w, "exit 0 done, 1 refused or unreachable, 2 usage, 3 shredded (410: the data is erased).")
	fmt.Fprintln(w, "Docs: docs/api.md (CLI), docs/operations.md.")
}

// helpRequested reports whether args ask for help: -h, -help or --help
// anywhere before a "--". Help wins over everything else on the line, so
// that a user who adds -h to a half-typed command gets the help, never a
// run of the command.
func helpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp writes the help of cmd (with the subcommand named in args,
// for token and backup) to w, by running the command with -h alone: every
// command parses its flags before anything else, so -h prints its usage
// and does nothing. It returns the exit status: 0, or 2 for an unknown
// command.
func commandHelp(ctx context.Context, cmd string, args []string, w io.Writer, getenv func(string) string) int {
	c, ok := findCommand(cmd)
	if !ok {
		fmt.Fprintf(w, "shredd: unknown command %q\n", cmd)
		writeUsage(w)
		return exitUsage
	}
	var sub string
	if len(args) > 0 && slices.Contains(subcommands[cmd], args[0]) {
		sub = args[0]
	}
	var buf bytes.Buffer
	code := exitUsage
	switch cmd {
	case "serve":
		if _, err := ParseFlags([]string{"-h"}, &buf, getenv); err == nil {
			code = exitOK
		}
	case "token":
		if sub == "" {
			fmt.Fprintln(&buf, tokenUsage)
		} else {
			code = tokenCmd(ctx, []string{sub, "-h"}, &buf, &buf, getenv)
		}
	case "encrypt", "decrypt", "forget", "reinstate", "status", "attestation", "export", "checkpoint":
		code = clientCmd(ctx, cmd, []string{"-h"}, strings.NewReader(""), &buf, &buf, getenv)
	case "keygen":
		code = keygenCmd([]string{"-h"}, &buf, &buf)
	case "backup":
		a := []string{"-h"}
		if sub != "" {
			a = []string{sub, "-h"}
		}
		code = backupCmd(ctx, a, &buf, &buf, getenv)
	case "restore":
		code = restoreCmd(ctx, []string{"-h"}, &buf, &buf, getenv)
	case "ledger":
		fmt.Fprintln(&buf, ledgerUsage)
		code = exitOK
	case "wal":
		fmt.Fprintln(&buf, walUsage)
		code = exitOK
	case "reregister":
		code = reregisterCmd(ctx, []string{"-h"}, strings.NewReader(""), &buf, &buf, getenv)
	case "verify":
		code = verifyCmd([]string{"-h"}, &buf, &buf)
	case "witness":
		a := []string{"-h"}
		if sub != "" {
			a = []string{sub, "-h"}
		}
		code = witnessCmd(ctx, a, &buf, &buf)
	case "completion":
		fmt.Fprintln(&buf, completionUsage)
	case "version":
		fmt.Fprintln(&buf, "usage: shredd version    (or shredd --version)\n  prints the version, the commit it was built from and the Go version")
	case "help":
		writeUsage(&buf)
	}
	if code != exitOK && code != exitUsage {
		// Not a help: something ran. It cannot with -h alone; say so
		// rather than hide it.
		w.Write(buf.Bytes())
		return code
	}
	out := buf.String()
	if !strings.HasPrefix(out, "usage:") {
		name := "shredd " + cmd
		if sub != "" {
			name += " " + sub
		}
		head := cmd + " " + c.args
		if sub != "" {
			head = cmd + " " + sub + " [flags]"
		}
		out = fmt.Sprintf("usage: shredd %s\n  %s\n%s", head, c.summary,
			strings.Replace(out, "Usage of "+name+":\n", "flags:\n", 1))
	}
	io.WriteString(w, out)
	return exitOK
}

// versionText is what shredd version prints: the version, then the commit
// and the toolchain.
func versionText() string {
	b := api.ReadBuildInfo()
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	s := fmt.Sprintf("shredd %s\ncommit: %s\n", b.Version, commit)
	if b.CommitTime != "" {
		s += "commit time: " + b.CommitTime + "\n"
	}
	return s + fmt.Sprintf("go: %s %s/%s\n", b.GoVersion, runtime.GOOS, runtime.GOARCH)
}

const completionUsage = `usage: shredd completion bash|zsh
  prints a completion script for the shell:
    bash: source <(shredd completion bash)      (or save it as /etc/bash_completion.d/shredd)
    zsh:  source <(shredd completion zsh)       (or save it as _shredd in a directory of $fpath)
  The script asks shredd itself for the candidates: subcommands, flags, and the values of
  --root, --subject-keys and --scopes; anything else completes as a file name.`

// completionCmd runs shredd completion bash|zsh.
func completionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, completionUsage)
		return exitUsage
	}
	switch args[0] {
	case "bash":
		io.WriteString(stdout, bashCompletion)
	case "zsh":
		io.WriteString(stdout, zshCompletion)
	default:
		fmt.Fprintf(stderr, "shredd completion: no completion for %q\n%s\n", args[0], completionUsage)
		return exitUsage
	}
	return exitOK
}

// The scripts hand the words after "shredd" to shredd __complete, the last
// one being the word under the cursor (maybe empty), and offer what it
// prints, one candidate a line; nothing means a file name.
const bashCompletion = `# bash completion for shredd; generated by "shredd completion bash"
_shredd() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _shredd shredd
`

const zshCompletion = `#compdef shredd
# zsh completion for shredd; generated by "shredd completion zsh"
_shredd() {
    local -a candidates
    candidates=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    candidates=(${candidates:#})
    if (( ${#candidates} )); then
        compadd -- "${candidates[@]}"
    else
        _files
    fi
}
if [[ $funcstack[1] = _shredd ]]; then
    _shredd "$@"
else
    compdef _shredd shredd
fi
`

// flagLineRe matches a flag in the output of flag.PrintDefaults.
var flagLineRe = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_-]*)`)

// commandFlags returns the flags of cmd (and sub), as "--name", read from
// the command's own help, so that completion never drifts from the flags.
func commandFlags(ctx context.Context, cmd, sub string, getenv func(string) string) []string {
	var buf bytes.Buffer
	args := []string{}
	if sub != "" {
		args = append(args, sub)
	}
	commandHelp(ctx, cmd, args, &buf, getenv)
	var out []string
	for _, m := range flagLineRe.FindAllStringSubmatch(buf.String(), -1) {
		out = append(out, "--"+m[1])
	}
	return append(out, "--help")
}

// flagValues are the values a flag takes, where they are a fixed set.
var flagValues = map[string][]string{
	"--root":         {"local", "vault"},
	"--subject-keys": {"tree", "transit"},
	"--scopes":       access.AllScopes,
}

// completeCmd runs the hidden shredd __complete WORD...: the candidates
// for the last word given the ones before it (the words after "shredd"),
// one a line, filtered by the last word's prefix. No output means "a file
// name".
func completeCmd(ctx context.Context, words []string, stdout io.Writer, getenv func(string) string) int {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, prev := words[len(words)-1], words[:len(words)-1]
	var cands []string
	switch {
	case strings.HasPrefix(cur, "-") && strings.Contains(cur, "="): // --flag=value
		name, _, _ := strings.Cut(cur, "=")
		for _, v := range flagValues["--"+strings.TrimLeft(name, "-")] {
			cands = append(cands, name+"="+v)
		}
	case len(prev) == 0 && !strings.HasPrefix(cur, "-"):
		for _, c := range commands {
			cands = append(cands, c.name)
		}
	case len(prev) == 0: // shredd -<TAB>: the top-level flags, then serve's
		cands = append([]string{"--version"}, commandFlags(ctx, "serve", "", getenv)...)
	default:
		cmd, rest := prev[0], prev[1:]
		if strings.HasPrefix(cmd, "-") {
			cmd, rest = "serve", prev
		}
		subs := subcommands[cmd]
		switch {
		case cmd == "help" && len(rest) == 0:
			for _, c := range commands {
				cands = append(cands, c.name)
			}
		case len(rest) == 0 && len(subs) > 0 && !strings.HasPrefix(cur, "-"):
			cands = subs
		case strings.HasPrefix(cur, "-"):
			sub := ""
			if len(rest) > 0 && slices.Contains(subs, rest[0]) {
				sub = rest[0]
			}
			if _, ok := findCommand(cmd); ok && cmd != "help" && cmd != "completion" && cmd != "version" {
				cands = commandFlags(ctx, cmd, sub, getenv)
			}
		default: // the value of the flag before it, when a fixed set
			flag := prev[len(prev)-1]
			if flag == "=" && len(prev) >= 2 { // bash splits --flag=value at the =
				flag = prev[len(prev)-2]
			}
			cands = flagValues["--"+strings.TrimLeft(flag, "-")]
		}
	}
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(stdout, c)
		}
	}
	return exitOK
}
