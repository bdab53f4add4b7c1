package pgtest_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/internal/pgtest"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestURL: each URL is a database of its own, dropped when its test ends.
func TestURL(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("a", func(t *testing.T) {
		first = pgtest.URL(t)
		second := pgtest.URL(t)
		if first == second {
			t.Fatalf("two tests share %s", first)
		}
		a, b := open(t, first), open(t, second)
		if _, err := a.ExecContext(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := b.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("a table of one database is seen in the other: %d, %v", n, err)
		}
	})
	// The database of the finished subtest is gone.
	other := open(t, pgtest.URL(t))
	name := first[strings.LastIndex(first, "/")+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	var n int
	if err := other.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test: %d, %v", name, n, err)
	}
}

// TestServerUser: as root, the private server runs as the postgres user
// (initdb and postgres refuse root).
func TestServerUser(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("using the server at $" + pgtest.EnvURL + "; no private server to check")
	}
	pgtest.URL(t)
	pid := pgtest.PID()
	if pid == 0 {
		t.Fatal("no private server after URL")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid = f[1]
		}
	}
	want := strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		want = u.Uid
	}
	if uid != want {
		t.Fatalf("server runs as uid %s, want %s", uid, want)
	}
}

// TestNoStrayServer runs a test binary that starts a private server and
// dies without stopping it, then one that ends normally: either way the
// server and its session must be gone, and the dead one's files are
// removed by the next start.
func TestNoStrayServer(t *testing.T) {
	var crashed *exec.Cmd
	for _, mode := range []string{"crash", "clean"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PGTEST_HELPER="+mode, pgtest.EnvURL+"=")
		out, err := cmd.CombinedOutput()
		if mode == "clean" && err != nil || mode == "crash" && cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("helper (%s): %v\n%s", mode, err, out)
		}
		var pids []int
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PGTEST_PIDS="); ok {
				for _, f := range strings.Split(v, ",") {
					pid, err := strconv.Atoi(f)
					if err != nil {
						t.Fatal(err)
					}
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) != 2 {
			t.Fatalf("helper (%s) printed no server and session pids:\n%s", mode, out)
		}
		for _, pid := range pids {
			waitGone(t, pid, 30*time.Second)
		}
		if mode == "crash" {
			crashed = cmd
			if len(ownedBy(t, cmd.Process.Pid)) != 1 {
				t.Fatal("the crashed helper left no cluster directory (was one made?)")
			}
		}
	}
	if dirs := ownedBy(t, crashed.Process.Pid); len(dirs) != 0 {
		t.Fatalf("the next start did not remove the crashed cluster's files: %v", dirs)
	}
}

// ownedBy lists the private cluster directories of test binary pid.
func ownedBy(t *testing.T, pid int) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "deputy-pg-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "owner.pid")); err == nil && string(b) == strconv.Itoa(pid) {
			out = append(out, d)
		}
	}
	return out
}

// waitGone waits until process pid has exited, through a pidfd (no
// polling), failing t after timeout.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	} else if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(timeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %d: %v", pid, err)
		}
		if n == 0 {
			t.Fatalf("process %d still runs %v after the test binary ended", pid, timeout)
		}
		return
	}
}

// TestHelperServer is the test binary TestNoStrayServer runs; on its own
// it does nothing.
func TestHelperServer(t *testing.T) {
	mode := os.Getenv("PGTEST_HELPER")
	if mode == "" {
		return
	}
	db := open(t, pgtest.URL(t))
	var backend int
	if err := db.QueryRowContext(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PGTEST_PIDS=%d,%d\n", pgtest.PID(), backend)
	if mode == "crash" {
		os.Exit(3) // no cleanup, no pgtest.Main shutdown: as if killed
	}
}
