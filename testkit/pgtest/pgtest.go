// Package pgtest runs a real PostgreSQL server on 127.0.0.1 for tests: one
// per test binary, in a temporary directory, with a fresh database for
// each caller (never a fake). The server binaries come from
// SHREDD_PG_BIN, or Debian's /usr/lib/postgresql/15/bin (package
// postgresql-15, which scripts/test.sh installs where it is missing). As
// root, the server runs as the user "postgres" (PostgreSQL refuses to run
// as root) or SHREDD_PG_USER.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the driver of the admin connection

	"github.com/shredd/shredd/testkit/freeport"
)

// DefaultBin is where Debian's postgresql-15 puts the server binaries.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// Server is a running PostgreSQL server.
type Server struct {
	Port int
	bin  string
	dir  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	cred *syscall.Credential
	mu   sync.Mutex
	n    int
}

var (
	mu     sync.Mutex
	shared *Server
	err0   error
)

// Shared returns the test binary's server, starting it on first use.
// Cleanup (from TestMain) stops it; without one, the server dies with the
// test binary and the next Start removes its directory.
func Shared(t testing.TB) *Server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && err0 == nil {
		shared, err0 = Start()
	}
	if err0 != nil {
		t.Fatalf("pgtest: %v", err0)
	}
	return shared
}

// Cleanup stops the shared server, if one was started.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// Start initialises a cluster in a new temporary directory and starts a
// server on a free loopback port.
func Start() (*Server, error) {
	bin := os.Getenv("SHREDD_PG_BIN")
	if bin == "" {
		bin = DefaultBin
	}
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, fmt.Errorf("no PostgreSQL server binaries in %s (install Debian's postgresql-15, as scripts/test.sh does, or set SHREDD_PG_BIN): %w", bin, err)
	}
	removeStale()
	dir, err := os.MkdirTemp("", fmt.Sprintf("shredd-pg-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, log: &bytes.Buffer{}}
	if os.Geteuid() == 0 {
		name := os.Getenv("SHREDD_PG_USER")
		if name == "" {
			name = "postgres"
		}
		u, err := user.Lookup(name)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no user %q to run it as: %w", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "shredd", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.Port = port
		s.log.Reset()
		s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=64MB",
			"-c", "fsync=on", "-c", "synchronous_commit=on")
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := s.waitReady(30 * time.Second); err == nil {
			return s, nil
		} else if attempt == 2 {
			s.Stop()
			return nil, fmt.Errorf("postgres did not start: %w\n%s", err, s.log)
		}
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// removeStale removes the directories of servers whose test binary is gone
// without a Cleanup (a test binary without TestMain): the server itself
// died with it (Pdeathsig), its directory stays until here.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "shredd-pg-*-*"))
	for _, d := range dirs {
		f := strings.SplitN(filepath.Base(d), "-", 4)
		if len(f) < 4 {
			continue
		}
		pid, err := strconv.Atoi(f[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// freePort returns a port for a server, below the ephemeral range
// (freeport).
func freePort() (int, error) {
	return freeport.Ports(1)
}

func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		db, err := sql.Open("pgx", s.DSN("postgres"))
		if err == nil {
			err = db.PingContext(context.Background())
			db.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if s.cmd.ProcessState != nil {
			return errors.New("the server exited")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Bin is the path of the PostgreSQL program name (pg_dump, pg_restore)
// beside the server's.
func (s *Server) Bin(name string) string { return filepath.Join(s.bin, name) }

// DSN is the connection string of database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://shredd@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// NewDatabase creates an empty database of its own for t and returns its
// connection string; it is dropped when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n)
	s.mu.Unlock()
	admin, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", s.DSN("postgres"))
		if err != nil {
			return
		}
		defer admin.Close()
		admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	return s.DSN(name)
}

// Pause stops the server's processes (SIGSTOP to the postmaster and each
// of its children, which PostgreSQL puts in sessions of their own): its
// port stays bound and connections hang, as with a server that stopped
// answering; Resume lets them go on.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signalAll(t, syscall.SIGSTOP)
	t.Cleanup(func() { s.signalAll(t, syscall.SIGCONT) }) // a failed test must not leave it stopped
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signalAll(t, syscall.SIGCONT)
}

func (s *Server) signalAll(t testing.TB, sig syscall.Signal) {
	// The postmaster first: stopped, it forks no new backend, so the
	// children listed after it are all there are. (Listed before it, a
	// backend forked in between, for a pool's new connection, escaped the
	// pause and served while the server was "frozen".)
	pm := s.cmd.Process.Pid
	if err := syscall.Kill(pm, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Fatal(err)
	}
	signalled := map[int]bool{}
	for range 3 { // again, for a fork that was under way when the postmaster stopped
		for _, pid := range childrenOf(pm) {
			if signalled[pid] {
				continue
			}
			signalled[pid] = true
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatal(err)
			}
		}
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		i := bytes.LastIndexByte(b, ')')
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	return out
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	os.RemoveAll(s.dir)
}
