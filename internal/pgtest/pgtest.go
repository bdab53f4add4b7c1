// Package pgtest gives tests a fresh Postgres database each, so a plain
// `go test ./...` covers the Postgres store too.
//
// With $DEPUTY_TEST_POSTGRES_URL set (a URL whose user may create
// databases), URL creates each test's database on that server. Without
// it, the first URL call starts one private cluster for the whole test
// binary: initdb into a temporary directory and a postgres server on a free
// port of 127.0.0.1, fsync off. initdb refuses to run as root, so as root
// both run as the `postgres` user. The server is stopped by Main when the
// tests end, and is also set to die with the test binary (a parent-death
// signal), so a crashed or timed-out test run leaves no server behind.
//
// A package using URL must call Main from its TestMain.
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"go.uber.org/goleak"
)

// EnvURL names the variable that points the tests at an existing server.
const EnvURL = "DEPUTY_TEST_POSTGRES_URL"

// startTimeout bounds initdb plus the server's start (about two seconds
// here); a slow CI machine gets room.
const startTimeout = 2 * time.Minute

var (
	mainCalled atomic.Bool

	mu     sync.Mutex
	srv    *server // the private cluster, if one was started
	admin  *sql.DB // connection to the maintenance database
	base   *url.URL
	setErr error // why the server could not be reached; sticky
	setUp  bool
)

// Main runs the package's tests, stops the private cluster if one was
// started, then fails the run if goroutines leaked (as
// goleak.VerifyTestMain does). Call it from TestMain.
func Main(m *testing.M, opts ...goleak.Option) {
	mainCalled.Store(true)
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// URL returns the URL of a new, empty database for t, dropped when t ends.
// Without Postgres it fails t, saying how to install it.
func URL(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) from TestMain, so the test server is stopped when the tests end")
	}
	db, u, err := connect()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := "deputy_test_" + randomHex(8)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// FORCE ends sessions a test left open.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dbURL := *u
	dbURL.Path = "/" + name
	return dbURL.String()
}

// connect returns the maintenance connection, starting the private
// cluster on first use when no server is given.
func connect() (*sql.DB, *url.URL, error) {
	mu.Lock()
	defer mu.Unlock()
	if setUp {
		return admin, base, setErr
	}
	setUp = true
	raw := os.Getenv(EnvURL)
	if raw == "" {
		srv, setErr = startServer()
		if setErr != nil {
			return nil, nil, setErr
		}
		raw = srv.url
	}
	base, setErr = url.Parse(raw)
	if setErr != nil {
		// The URL may hold a password: say only where it came from.
		setErr = fmt.Errorf("$%s does not parse as a URL", EnvURL)
		return nil, nil, setErr
	}
	admin, setErr = sql.Open("pgx", raw)
	if setErr == nil {
		admin.SetMaxOpenConns(4)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		setErr = admin.PingContext(ctx)
		cancel()
	}
	if setErr != nil {
		setErr = fmt.Errorf("connect to the test server (%s): %w", base.Redacted(), setErr)
	}
	return admin, base, setErr
}

// shutdown closes the maintenance connection and stops the private
// cluster.
func shutdown() error {
	mu.Lock()
	defer mu.Unlock()
	var errs []error
	if admin != nil {
		errs = append(errs, admin.Close())
		admin = nil
	}
	if srv != nil {
		errs = append(errs, srv.stop())
		srv = nil
	}
	return errors.Join(errs...)
}

// server is a private Postgres cluster.
type server struct {
	dir    string // holds the data directory and the socket
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed once the process has been waited for
	log    *tail
}

// binDir finds the directory holding initdb and postgres: on PATH, or
// Debian's /usr/lib/postgresql/VERSION/bin (the newest).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server programs not found (initdb on PATH or in /usr/lib/postgresql/*/bin). "+
		"Install them (Debian: apt-get install postgresql-15), or set $%s to a server where this user may create databases", EnvURL)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func startServer() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, initdb needs another user and there is no `postgres` user (%v); installing postgresql-15 creates it", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir // the user may not be allowed into the test's directory
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// A free port can be taken between asking and binding: try again then.
	for try := 1; ; try++ {
		s, err := launch(bin, dir, data, attr)
		if err == nil {
			return s, nil
		}
		if try == 3 || !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "could not create any TCP/IP sockets") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// launch starts postgres and waits for it to say it is ready.
func launch(bin, dir, data string, attr *syscall.SysProcAttr) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-F", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=300")
	cmd.Dir = dir
	a := *attr
	a.Setpgid = true // so stop can reach the backends too
	cmd.SysProcAttr = &a
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &server{dir: dir, cmd: cmd, exited: make(chan struct{}), log: &tail{},
		url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	ready := make(chan struct{})
	// The server logs to stderr; read it all (a full pipe would stall the
	// server), watch for readiness, keep the end for error messages.
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.log.add(line)
			if !signalled && strings.Contains(line, "database system is ready to accept connections") {
				close(ready)
				signalled = true
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.exited)
	}()
	timeout := time.NewTimer(startTimeout)
	defer timeout.Stop()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("postgres exited at start:\n%s", s.log)
	case <-timeout.C:
		s.stop()
		return nil, fmt.Errorf("postgres not ready after %v:\n%s", startTimeout, s.log)
	}
}

// A private cluster's directory is os.TempDir()/deputy-pg-*, with the
// test binary's pid in its owner file.
const (
	tempPrefix = "deputy-pg-"
	ownerFile  = "owner.pid"
)

// removeStale removes the directories of clusters whose test binary died
// without stopping them (the parent-death signal stopped the server, but
// nothing removed its files).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // being set up, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop shuts the server down (fast shutdown: sessions are ended), kills
// its process group if it does not exit in time, and removes its files.
func (s *server) stop() error {
	var err error
	s.cmd.Process.Signal(syscall.SIGINT)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		err = fmt.Errorf("postgres did not stop in 30s; killed:\n%s", s.log)
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// PID returns the private server's process id, 0 when the tests use
// $DEPUTY_TEST_POSTGRES_URL or no server was started.
func PID() int {
	mu.Lock()
	defer mu.Unlock()
	if srv == nil {
		return 0
	}
	return srv.cmd.Process.Pid
}

// tail keeps the last lines of the server's log.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 40 {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
