package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/shell"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Box is the bash tool's sandbox.
var _ shell.Sandbox = (*Box)(nil)

// failAfter bounds how long a test waits for something that should happen
// promptly; it is a failure deadline, never a pause.
const failAfter = 30 * time.Second

// missing skips a test whose system package is not installed, so the
// README's test command runs on a machine without it; CI, which installs
// them, sets DEPUTY_REQUIRE_ISOLATION=1 and the skip becomes a failure.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// requireBwrap skips when bubblewrap is not installed, the one reason the
// isolation suite may not run; any other failure to make a sandbox fails.
func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bubblewrap is not installed, so the sandbox cannot be tested: apt-get install bubblewrap")
	}
	if err := Available(); err != nil {
		t.Fatal(err)
	}
}

// env is the environment of sandboxed test commands: the test's, plus a
// mark that tells their processes apart from everything else on the host.
// markName is the variable that marks a test's sandboxed programs.
// It is not a DEPUTY_ variable: the bash tool never passes those.
const markName = "SANDBOX_ESCAPE_MARK"

func markedEnv(t *testing.T) ([]string, string) {
	t.Helper()
	mark := markName + "=" + randHex(t)
	return append(os.Environ(), mark), mark
}

func randHex(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// survivors lists the host's live processes carrying mark in their
// environment: processes a sandboxed command started. Zombies have an
// empty environ and do not count: they run nothing.
func survivors(t *testing.T, mark string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("the survivor checks read /proc: %v", err)
	}
	var live []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains("\x00"+string(b)+"\x00", "\x00"+mark+"\x00") {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		live = append(live, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return live
}

// newBox makes a box and closes it at the end of the test.
func newBox(t testing.TB, p Policy) *Box {
	t.Helper()
	p.Env = append(p.Env, markName) // survivors finds the programs by it
	b, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// sandboxedBash is the bash tool running its commands in b.
func sandboxedBash(t testing.TB, b *Box, cfg shell.Config) *tool.Set {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = b.Dir()
	}
	cfg.Sandbox = b
	cfg.PassEnv = append(cfg.PassEnv, markName)
	bash, err := shell.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool.MustSet(bash)
}

func plainBash(t testing.TB, cfg shell.Config) *tool.Set {
	t.Helper()
	cfg.PassEnv = append(cfg.PassEnv, markName)
	bash, err := shell.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool.MustSet(bash)
}

func runBash(ctx context.Context, set *tool.Set, command string, timeoutS int) (string, bool) {
	args := map[string]any{"command": command}
	if timeoutS > 0 {
		args["timeout_s"] = timeoutS
	}
	raw, _ := json.Marshal(args)
	return set.Call(ctx, "bash", raw)
}

// pollUntil checks cond every few milliseconds until it holds, failing the
// test past failAfter. It observes what the kernel does on its own time (a
// fork bomb reaching its limit), which has no event to wait on.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failAfter)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		<-tick.C
	}
}

// responsive checks that the machine still runs the test's own work
// promptly: a 10 ms timer must fire within a second.
func responsive(t *testing.T) {
	t.Helper()
	start := time.Now()
	fired := make(chan time.Time, 1)
	time.AfterFunc(10*time.Millisecond, func() { fired <- time.Now() })
	select {
	case at := <-fired:
		if late := at.Sub(start) - 10*time.Millisecond; late > time.Second {
			t.Errorf("a 10 ms timer fired %v late: the machine is not responsive", late)
		}
	case <-time.After(failAfter):
		t.Fatal("a 10 ms timer never fired")
	}
}

// treeDigest hashes a directory tree: names, kinds, permissions, contents
// and symlink targets. Equal digests mean byte-identical trees.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	for _, l := range lines {
		io.WriteString(h, l+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// busyboxRoot builds a tiny root filesystem: a static busybox in /bin and
// a symlink per applet, /etc/passwd, and nothing else.
func busyboxRoot(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		missing(t, "the container tests build a root filesystem from a static busybox: apt-get install busybox-static")
	}
	if f, err := elf.Open(bb); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				f.Close()
				t.Fatalf("%s is dynamically linked and cannot run in a bare root filesystem: apt-get install busybox-static", bb)
			}
		}
		f.Close()
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(list)))
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || name == "busybox" || strings.Contains(name, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "etc", "passwd"), "nobody:x:65534:65534:nobody:/tmp:/bin/sh\n")
	return root
}

// fakeClock is a fake clock at an arbitrary fixed time.
func fakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_000_000, 0)) }

// mkfifo makes a FIFO a command writes to: opening its read end returns
// once the command runs, with no polling.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
}

// openFIFO opens the read end, which blocks until a writer opens it.
func openFIFO(t *testing.T, p string) *os.File {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f == nil {
			t.FailNow()
		}
		t.Cleanup(func() { f.Close() })
		return f
	case <-time.After(failAfter):
		t.Fatal("the command never opened the FIFO")
		return nil
	}
}
