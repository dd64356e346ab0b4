package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size (mount's size=, "8m") on a new
// directory, unmounted when the test ends (after the servers it started
// are stopped: cleanups run last first). Mounting needs root; CI runs the
// tests as root, and a run without it fails here rather than skip what it
// cannot check.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test mounts tmpfs file systems to fill them up, which needs root: run it as root (CI does), e.g. sudo -E go test -run %s ./cmd/shredd", t.Name())
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full (ENOSPC)
// and returns its path: removing it frees the space.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

// readyz answers GET /readyz without a token.
func (s *server) readyz(t *testing.T) reply {
	t.Helper()
	r, err := s.callToken(http.MethodGet, "/readyz", "-", nil)
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	return r
}

// waitReady polls /readyz until ok holds for its answer (the probe of a
// disk is reused for a second), and returns that answer.
func (s *server) waitReady(t *testing.T, what string, ok func(reply) bool) reply {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		r := s.readyz(t)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz: still %d %s after %v, want %s", r.Status, r.Body, hang, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// notReady checks a 503 not_ready answer that names part (and not other)
// and says when to retry.
func notReady(t *testing.T, r reply, part, other string) {
	t.Helper()
	p := r.problem(t)
	if p.Code != "not_ready" || !strings.Contains(p.Detail, part) || strings.Contains(p.Detail, other) {
		t.Fatalf("GET /readyz: %+v, want not_ready naming %q and not %q", p, part, other)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("GET /readyz: 503 without Retry-After")
	}
}

// TestFullDisks makes the backups' volume read-only, then fills, one at a
// time, the data directory's disk and the forget ledger's (--forget-ledger
// on a volume of its own), each a real tmpfs: /readyz answers 503 naming
// the failing one (it answered 200 while
// every forget failed), encrypts on the full data disk answer 503
// disk_full with Retry-After, never 500, and all is well again once space
// is freed.
func TestFullDisks(t *testing.T) {
	t.Parallel()
	dataMnt, ledgerMnt, backupMnt := mountTmpfs(t, "32m"), mountTmpfs(t, "2m"), mountTmpfs(t, "2m")
	dir := filepath.Join(dataMnt, "data")
	s := startServer(t, dir, serverOpts{Buckets: 4, Args: []string{"--forget-ledger", filepath.Join(ledgerMnt, "forgets.ledger"),
		"--backup-dir", filepath.Join(backupMnt, "backups")}})
	s.putKinds(t, "episodic")
	ready := func(r reply) bool { return r.Status == http.StatusOK }
	var body struct {
		Disks map[string]string `json:"disks"`
	}
	s.waitReady(t, "200", ready).into(t, &body)
	if body.Disks["data"] != "ok" || body.Disks["ledger"] != "ok" || body.Disks["backups"] != "ok" {
		t.Fatalf("GET /readyz: disks %v, want data, ledger and backups ok", body.Disks)
	}
	unready := func(r reply) bool { return r.Status == http.StatusServiceUnavailable }

	// The backups' volume read-only (EROFS): not ready, naming it.
	remount := func(mode string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+mode, backupMnt).CombinedOutput(); err != nil {
			t.Fatalf("remount %s %s: %v: %s", mode, backupMnt, err, out)
		}
	}
	remount("ro")
	notReady(t, s.waitReady(t, "503", unready), "disk backups", "disk data")
	remount("rw")
	s.waitReady(t, "200 once the backups' volume is writable again", ready)

	// The ledger's disk full: not ready, naming it.
	fill := fillDisk(t, ledgerMnt)
	notReady(t, s.waitReady(t, "503", unready), "disk ledger", "disk data")
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t, "200 once the ledger's disk has room", ready)

	// The data disk full: not ready, naming it, and encrypts for new
	// subjects (each a key, a log entry, a registration) answer 503
	// disk_full with Retry-After as soon as SQLite or the log needs a
	// block it cannot have; never 500.
	fill = fillDisk(t, dataMnt)
	// The database's own probe may fail first (SQLITE_FULL); the disk's
	// probe follows within a second.
	notReady(t, s.waitReady(t, "503 naming the data disk", func(r reply) bool {
		return r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "disk data")
	}), "disk data", "disk ledger")
	refused := 0
	for i := 0; i < 2000 && refused == 0; i++ {
		r := s.do(t, http.MethodPost, "/v1/encrypt", sealReq{Subject: fmt.Sprintf("subject-%d", i), Kind: "episodic", Plaintext: b64("on a full disk")})
		switch r.Status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			refused++
			if p := r.problem(t); p.Code != "disk_full" {
				t.Fatalf("encrypt on a full disk: %+v, want disk_full", p)
			}
			if r.Header.Get("Retry-After") == "" {
				t.Fatalf("encrypt on a full disk: 503 without Retry-After")
			}
		default:
			t.Fatalf("encrypt %d on a full disk: %d %s, want 200 or 503 disk_full", i, r.Status, r.Body)
		}
	}
	if refused == 0 {
		t.Fatalf("2000 encrypts for new subjects on a full data disk all succeeded: the disk was not full")
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t, "200 once the data disk has room", ready)
	rec := s.seal(t, sealReq{Subject: "after", Kind: "episodic"}, "after the disk had room again", "")
	s.open(t, rec)
	s.stop()
}
