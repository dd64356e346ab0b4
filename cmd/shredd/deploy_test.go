package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/internal/netaddr"
)

// unitFile is a parsed systemd unit: each key's values, in order, by
// "Section.Key".
type unitFile map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

// envLine is a NAME=value line of the environment file, commented out
// (an example) or not.
var envLine = regexp.MustCompile(`^(#?)([A-Z][A-Z0-9_]*)=(.*)$`)

// TestDeployFiles checks deploy/shredd.service and deploy/shredd.env
// against the binary: every variable the environment file names (its
// commented examples too), and every Environment= of the unit, is one
// shredd serve reads; the active lines parse as shredd serve's
// configuration, with the data and backup directories in the unit's
// StateDirectory; the unit runs shredd serve with the hardening
// docs/operations.md describes; and systemd-analyze verify, where it is
// installed, finds nothing to say about the unit with the real binary.
func TestDeployFiles(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy")
	unitPath, envPath := filepath.Join(dir, "shredd.service"), filepath.Join(dir, "shredd.env")
	u := parseUnit(t, unitPath)

	// The names shredd serve reads: recorded from ParseFlags itself, with
	// the local root and with Vault (which reads Vault's own variables).
	read := map[string]bool{}
	for _, root := range []string{"local", "vault"} {
		_, _ = ParseFlags(nil, io.Discard, func(k string) string {
			read[k] = true
			switch k {
			case "SHREDD_ROOT":
				return root
			case "VAULT_ADDR", "VAULT_TOKEN":
				return "x"
			}
			return ""
		})
	}
	if !read["SHREDD_DATA_DIR"] || !read["SHREDD_VAULT_KEY"] || !read["VAULT_TOKEN"] {
		t.Fatalf("ParseFlags read %v: the recording is broken", read)
	}

	raw, err := os.ReadFile(envPath)
	if err != nil {
		t.Fatal(err)
	}
	active := map[string]string{}
	var names []string
	for n, line := range strings.Split(string(raw), "\n") {
		m := envLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				t.Errorf("%s:%d: not NAME=value: %q", envPath, n+1, line)
			}
			continue
		}
		names = append(names, m[2])
		if !read[m[2]] {
			t.Errorf("%s:%d: shredd serve does not read %s", envPath, n+1, m[2])
		}
		if m[1] == "" {
			if _, dup := active[m[2]]; dup {
				t.Errorf("%s:%d: %s set twice", envPath, n+1, m[2])
			}
			active[m[2]] = m[3]
		}
	}
	for _, e := range u["Service.Environment"] {
		name, _, _ := strings.Cut(e, "=")
		if !read[name] {
			t.Errorf("the unit's Environment=%s: shredd serve does not read %s", e, name)
		}
	}
	// Every flag of shredd serve is at least mentioned in the file, so
	// that an operator finds it there.
	for name := range read {
		if strings.HasPrefix(name, "SHREDD_") && !slices.Contains(names, name) {
			t.Errorf("%s does not mention %s", envPath, name)
		}
	}

	p, err := ParseFlags(nil, io.Discard, func(k string) string { return active[k] })
	if err != nil {
		t.Fatalf("the active lines of %s do not parse: %v", envPath, err)
	}
	states := strings.Fields(strings.Join(u["Service.StateDirectory"], " "))
	if len(states) != 2 || p.DataDir != "/var/lib/"+states[0] || p.BackupDir != "/var/lib/"+states[1] {
		t.Errorf("data dir %s and backup dir %s, want /var/lib/ + the StateDirectory %v", p.DataDir, p.BackupDir, states)
	}
	if !netaddr.IsLoopback(p.Addr) {
		t.Errorf("the example listens on %s, not a loopback address", p.Addr)
	}

	exec0 := strings.Fields(strings.Join(u["Service.ExecStart"], " "))
	if len(exec0) != 2 || exec0[1] != "serve" {
		t.Errorf("ExecStart=%v, want the binary and serve", u["Service.ExecStart"])
	}
	if got := u["Service.EnvironmentFile"]; len(got) != 1 || got[0] != "/etc/shredd/shredd.env" {
		t.Errorf("EnvironmentFile=%v", got)
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "CapabilityBoundingSet": "", "LimitCORE": "0", "UMask": "0077",
		"StateDirectoryMode": "0700", "KillSignal": "SIGTERM", "User": "shredd",
	} {
		if got := u["Service."+key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v, want %q", key, got, want)
		}
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze is not installed: the unit was checked against the binary's flags only")
		return
	}
	// The unit as installed, with the paths of this test: the real binary
	// (verify checks that ExecStart is executable) and the env file.
	tmp := t.TempDir()
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer("ExecStart="+exec0[0], "ExecStart="+shreddBinary(t),
		"EnvironmentFile=/etc/shredd/shredd.env", "EnvironmentFile="+mustAbs(t, envPath)).Replace(string(unit))
	verify := func(name, text string) string {
		path := filepath.Join(tmp, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(sa, "verify", path).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if out := verify("shredd.service", local); out != "" {
		t.Errorf("systemd-analyze verify %s:\n%s", unitPath, out)
	}
	// The check sees mistakes: a misspelt key and a bad boolean.
	bad := strings.Replace(local, "NoNewPrivileges=yes", "NoNewPrivileges=maybe\nProtectSytem=strict", 1)
	if out := verify("bad.service", bad); !strings.Contains(out, "maybe") || !strings.Contains(out, "ProtectSytem") {
		t.Errorf("systemd-analyze verify did not report a broken copy of the unit: %q", out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
