package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/sandbox/cgroup"
	"github.com/deputy-run/deputy/tool/shell"
)

// The escape suite: each test runs a hostile command through the bash tool
// in a sandbox and checks on the host's side that it got nowhere. Each
// also runs the same attempt where it must succeed (unsandboxed, or with
// the grant), so a test that cannot fail would show.

// layout is a workspace with a secret beside it, outside the roots.
type layout struct {
	parent, ws, secret string
}

const secretText = "s3cr3t-outside-the-roots"

func newLayout(t *testing.T) layout {
	t.Helper()
	parent := t.TempDir()
	l := layout{parent: parent, ws: filepath.Join(parent, "ws"), secret: filepath.Join(parent, "secret.txt")}
	writeFile(t, l.secret, secretText)
	if err := os.Mkdir(l.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestEscapeReadOutsideRoots(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	env, mark := markedEnv(t)
	attempts := fmt.Sprintf(`cat '%[1]s'; cat ../secret.txt; ls '%[2]s'; cat /proc/%[3]d/environ; `+
		`ls ~root /root /home; cat /etc/shadow; grep -rs s3cr3t /tmp /proc/*/cwd/.. ..; echo done`,
		l.secret, l.parent, os.Getpid())

	// Unconfined, the same command reads the secret: the attempts are real.
	out, _ := runBash(context.Background(), plainBash(t, shell.Config{Dir: l.ws, Env: env}), fmt.Sprintf(`cat '%s'`, l.secret), 0)
	if !strings.Contains(out, secretText) {
		t.Fatalf("control: the secret is not readable unconfined: %q", out)
	}

	b := newBox(t, Policy{Workspace: l.ws})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{Env: env}), attempts, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	if strings.Contains(out, secretText) {
		t.Errorf("the secret outside the roots was read:\n%s", out)
	}
	if want := fmt.Sprintf("/proc/%d/environ: No such file or directory", os.Getpid()); !strings.Contains(out, want) {
		t.Errorf("the test process is visible from the sandbox:\n%s", out)
	}
	if sh, err := os.ReadFile("/etc/shadow"); err == nil && len(sh) > 8 && strings.Contains(out, string(sh[:8])) {
		t.Errorf("/etc/shadow was read:\n%s", out)
	}
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes survived: %v", live)
	}
}

func TestEscapeWriteOutside(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	name := "deputy-escape-" + randHex(t)
	targets := []string{
		filepath.Join(l.parent, name),          // beside the workspace
		filepath.Join(os.TempDir(), name),      // the host's /tmp
		filepath.Join("/etc", name),            // the system
		filepath.Join("/usr/local", name),      // the system
		filepath.Join(os.Getenv("HOME"), name), // the home directory
	}
	var cmd strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&cmd, "echo x > '%s'; touch '%s'; mkdir '%s.d'; ", p, p, p)
	}
	fmt.Fprintf(&cmd, "echo x > ../%s; echo x > in-workspace; echo done", name)
	t.Cleanup(func() {
		for _, p := range targets {
			os.Remove(p)
			os.Remove(p + ".d")
		}
	})

	b := newBox(t, Policy{Workspace: l.ws})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd.String(), 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	for _, p := range targets {
		if exists(p) || exists(p+".d") {
			t.Errorf("%s was written from the sandbox", p)
		}
	}
	// The workspace is writable: the sandbox is not simply broken.
	if got := readFile(t, filepath.Join(l.ws, "in-workspace")); got != "x\n" {
		t.Errorf("workspace write: %q", got)
	}
	if exists(filepath.Join(l.parent, name)) {
		t.Error("../ led out of the workspace")
	}
}

func TestEscapeSymlinkOut(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	outDir := filepath.Join(l.parent, "outdir")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"abs":    l.secret,
		"rel":    "../secret.txt",
		"dir":    outDir,
		"reldir": "../outdir",
	} {
		if err := os.Symlink(target, filepath.Join(l.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := `cat abs rel; echo planted > dir/new; echo planted > reldir/new2; ln -s ../secret.txt fresh; cat fresh; ` +
		`echo planted > abs; echo done`

	// Unconfined, the links lead out.
	out, _ := runBash(context.Background(), plainBash(t, shell.Config{Dir: l.ws}), "cat abs", 0)
	if !strings.Contains(out, secretText) {
		t.Fatalf("control: the planted link does not lead to the secret: %q", out)
	}

	b := newBox(t, Policy{Workspace: l.ws})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	if strings.Contains(out, secretText) {
		t.Errorf("a symlink led to the secret:\n%s", out)
	}
	if got := readFile(t, l.secret); got != secretText {
		t.Errorf("the secret was overwritten through a symlink: %q", got)
	}
	for _, p := range []string{filepath.Join(outDir, "new"), filepath.Join(outDir, "new2")} {
		if exists(p) {
			t.Errorf("%s was written through a symlink", p)
		}
	}
}

// tcpServer listens on 127.0.0.1 on the host and records whom it accepted.
type tcpServer struct {
	ln   net.Listener
	mu   sync.Mutex
	from []string
	done chan struct{}
	seen chan string
}

func newTCPServer(t *testing.T) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln, done: make(chan struct{}), seen: make(chan string, 16)}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.from = append(s.from, c.RemoteAddr().String())
			s.mu.Unlock()
			select {
			case s.seen <- c.RemoteAddr().String():
			default:
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-s.done })
	return s
}

func (s *tcpServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// accepted returns whom the server accepted, excluding its own probe. The
// probe is a connection the test makes after the command: connections are
// accepted in order, so once the probe is seen, any earlier connection has
// been counted too.
func (s *tcpServer) accepted(t *testing.T) []string {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	probe := c.LocalAddr().String()
	defer c.Close()
	deadline := time.After(failAfter)
	for {
		select {
		case from := <-s.seen:
			if from == probe {
				s.mu.Lock()
				defer s.mu.Unlock()
				var others []string
				for _, f := range s.from {
					if f != probe {
						others = append(others, f)
					}
				}
				return others
			}
		case <-deadline:
			t.Fatal("the server never accepted the probe")
		}
	}
}

func TestEscapeNetwork(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	cmd := func(port int) string {
		return fmt.Sprintf(`(exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED) 2>&1; echo done`, port)
	}

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		srv := newTCPServer(t)
		b := newBox(t, Policy{Workspace: t.TempDir()})
		out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd(srv.port()), 30)
		if isErr || !strings.Contains(out, "done") {
			t.Fatalf("the command did not run to its end: %q", out)
		}
		if strings.Contains(out, "CONNECTED") {
			t.Errorf("the sandbox connected to the host:\n%s", out)
		}
		if got := srv.accepted(t); len(got) > 0 {
			t.Errorf("the host's server accepted connections from the sandbox: %v", got)
		}
	})
	t.Run("granted", func(t *testing.T) {
		t.Parallel()
		srv := newTCPServer(t)
		b := newBox(t, Policy{Workspace: t.TempDir(), Network: true})
		out, _ := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd(srv.port()), 30)
		if !strings.Contains(out, "CONNECTED") {
			t.Errorf("with the network granted, the connection failed:\n%s", out)
		}
		if got := srv.accepted(t); len(got) != 1 {
			t.Errorf("the server accepted %v, want the sandbox's one connection", got)
		}
	})
}

// A fork bomb stops at the process limit, the machine stays responsive,
// and the timeout kill leaves nothing behind.
func TestEscapeForkBomb(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	const limit = 64
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), MaxProcesses: limit})
	fc := fakeClock()
	set := sandboxedBash(t, b, shell.Config{Env: env, Clock: fc})
	type result struct {
		out   string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		out, isErr := runBash(context.Background(), set, `bomb() { bomb | bomb & }; bomb; sleep 1000`, 60)
		done <- result{out, isErr}
	}()

	var res result
	if b.cg.HasPids() {
		// The cgroup refuses forks past the limit; the bomb lingers until
		// the timeout.
		peak := 0
		pollUntil(t, "the fork bomb to reach the limit", func() bool {
			peak = max(peak, b.cg.Tasks())
			return b.cg.Refused() > 0
		})
		responsive(t)
		if peak > limit {
			t.Errorf("%d tasks in the box, over the limit of %d", peak, limit)
		}
		if err := fc.WaitPending(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(60 * time.Second)
		res = <-done
		if !res.isErr || !strings.Contains(res.out, "timed out") {
			t.Errorf("want the timeout to end the bomb: %q", res.out)
		}
		// The sandbox's init may still await reaping by the host's init
		// (bwrap, its parent, was killed first): a zombie, which the
		// cgroup counts until then.
		pollUntil(t, "the box's cgroup to empty", func() bool { return b.cg.Tasks() == 0 })
	} else {
		// Without a cgroup the watchdog kills the box's commands.
		select {
		case res = <-done:
		case <-time.After(failAfter):
			t.Fatal("the watchdog did not stop the fork bomb")
		}
		responsive(t)
		if !strings.Contains(res.out, "more than 64 processes") {
			t.Errorf("want the watchdog's note: %q", res.out)
		}
	}
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("%d processes of the bomb survived, e.g. %v", len(live), live[0])
	}
}

// The watchdog, for hosts without a pids cgroup, kills a box whose
// commands go over the limit.
func TestSandboxWatchdogKillsOverLimit(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), MaxProcesses: 16, forceWatchdog: true})
	if b.cg != nil {
		t.Fatal("forceWatchdog ignored")
	}
	set := sandboxedBash(t, b, shell.Config{Env: env, Clock: fakeClock()})
	out, _ := runBash(context.Background(), set, `for i in $(seq 40); do sleep 1000 & done; wait; echo finished`, 60)
	if strings.Contains(out, "finished") || !strings.Contains(out, "[sandbox: killed: more than 16 processes (watchdog)]") {
		t.Errorf("want the watchdog to kill the command: %q", out)
	}
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes survived: %v", live)
	}
	// Under the limit, the same box runs commands to their end.
	if out, _ := runBash(context.Background(), set, `sleep 0 & wait; echo finished`, 60); !strings.Contains(out, "finished") {
		t.Errorf("a command under the limit: %q", out)
	}
}

// A process left running by a command is dead when the tool returns,
// however it left: background job, new session, double fork, nohup.
func TestEscapeLeftRunning(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: t.TempDir()})
	set := sandboxedBash(t, b, shell.Config{Env: env})
	out, isErr := runBash(context.Background(), set,
		`sleep 1001 & setsid sleep 1002 & (sleep 1003 &) ; nohup sleep 1004 >/dev/null 2>&1 & disown -a; `+
			`setsid bash -c 'sleep 1005 & disown' ; echo started`, 30)
	if isErr || !strings.Contains(out, "started") {
		t.Fatalf("%q", out)
	}
	// No waiting: the tool returned after the sandbox was torn down.
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes outlived the command: %v", live)
	}
}

// Filling memory fails inside the sandbox under the limit; the host does
// not notice.
func TestEscapeMemory(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), MemoryBytes: 100 << 20})
	set := sandboxedBash(t, b, shell.Config{Env: env})
	// Under the limit it works: the command is sound.
	out, _ := runBash(context.Background(), set, `x=$(head -c 10000000 /dev/zero | tr '\0' x); echo len=${#x}`, 60)
	if !strings.Contains(out, "len=10000000") {
		t.Fatalf("a 10 MB string under a 100 MB limit: %q", out)
	}
	out, _ = runBash(context.Background(), set, `x=$(head -c 2000000000 /dev/zero | tr '\0' x); echo len=${#x}`, 60)
	if strings.Contains(out, "len=2000000000") {
		t.Errorf("a 2 GB string was built under a 100 MB limit: %q", out)
	}
	if !strings.Contains(out, "cannot allocate") && !strings.Contains(out, "signal") && !strings.Contains(out, "the memory limit (100 MiB for the sandbox) killed") {
		t.Errorf("want an allocation failure: %q", out)
	}
	responsive(t)
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes survived: %v", live)
	}
}

// A CPU-bound loop is killed at its CPU-time limit.
func TestSandboxCPULimit(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), CPUSeconds: 1})
	set := sandboxedBash(t, b, shell.Config{Clock: fakeClock()})
	out, _ := runBash(context.Background(), set, `bash -c 'while :; do :; done'; echo "status=$?"`, 60)
	// SIGXCPU is 24: the shell reports 128+24.
	if !strings.Contains(out, "status=152") {
		t.Errorf("want the loop killed by SIGXCPU: %q", out)
	}
}

// A repository's .git and deputy's own files lie in the writable
// workspace, yet programs cannot change them: a planted hook or pager
// would run at the user's next git command, outside the sandbox.
func TestEscapeThroughGitAndDeputyFiles(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	for _, d := range []string{".git/hooks", ".deputy"} {
		if err := os.MkdirAll(filepath.Join(l.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{".git/config": "[core]\n", ".deputy/deputy.db": "db", "deputy.yaml": "tiers: {}\n"}
	for rel, body := range files {
		if err := os.WriteFile(filepath.Join(l.ws, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := newBox(t, Policy{Workspace: l.ws, Protect: []string{".git", ".deputy", "deputy.yaml", ".claude"}})
	cmd := "printf '#!/bin/sh\\nid\\n' > .git/hooks/post-checkout; printf '[core]\\npager = sh -c id\\n' >> .git/config; " +
		"echo x >> .deputy/deputy.db; echo x >> deputy.yaml; rm -rf .git .deputy; mv .git moved; " +
		"mkdir -p .claude/agents; echo ok > fine.txt; echo done"
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	for rel, body := range files {
		if got := readFile(t, filepath.Join(l.ws, rel)); got != body {
			t.Errorf("%s was changed from the sandbox: %q", rel, got)
		}
	}
	if exists(filepath.Join(l.ws, ".git/hooks/post-checkout")) || exists(filepath.Join(l.ws, "moved")) {
		t.Error("a hook was planted, or .git moved")
	}
	if got := readFile(t, filepath.Join(l.ws, "fine.txt")); got != "ok\n" {
		t.Errorf("the rest of the workspace is not writable: %q", got)
	}
}

// A container's snapshot never applies changes under the protected paths,
// even those made outside its programs (the in-process file tools).
func TestContainerSnapshotKeepsProtectedPaths(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBox(t, Policy{Workspace: ws, Snapshot: true, Protect: []string{".git"}})
	if err := os.WriteFile(filepath.Join(b.Dir(), ".git", "config"), []byte("[core]\npager = sh -c id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir(), ".git", "hook"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir(), "work.txt"), []byte("done"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ws, ".git", "config")); got != "[core]\n" || exists(filepath.Join(ws, ".git", "hook")) {
		t.Errorf("the commit changed .git: config %q", got)
	}
	if got := readFile(t, filepath.Join(ws, "work.txt")); got != "done" || len(ch.Added) != 1 {
		t.Errorf("work.txt %q, changes %+v", got, ch)
	}
}

// protectedForTest is fence.Protected (which this package cannot import):
// every workspace path deputy reads definitions, configuration or its
// database from, and the repository's .git.
var protectedForTest = []string{".git/", ".deputy/", ".claude/", "deputy.yaml"}

// plantCommand tries every way a program has to create or replace the
// protected paths: a planted agent definition, a deputy.yaml that turns
// the sandbox off, a hook, a rename over the path, a symlink in its place.
const plantCommand = `rm -rf .claude .deputy .git deputy.yaml; ` +
	`mkdir -p .claude/agents; printf -- '---\nname: general-purpose\nmcpServers: {x: {command: sh}}\n---\n' > .claude/agents/general-purpose.md; ` +
	`mkdir -p .claude/skills/s; echo planted > .claude/skills/s/SKILL.md; echo planted > .claude/settings.json; ` +
	`printf '{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}' > .claude/settings.local.json; ` +
	`printf 'isolation:\n  allow_unsandboxed: true\n' > deputy.yaml; ` +
	`mkdir -p .deputy/agents; echo planted > .deputy/agents/x.md; ` +
	`mkdir -p .git/hooks; echo planted > .git/hooks/post-checkout; echo planted > .git/config; ` +
	`echo planted > spare; mv -f spare deputy.yaml; mkdir spared; mv -T spared .claude; ln -sfn /tmp .deputy; ` +
	`rm -rf spare spared; echo ok > fine.txt; echo done`

// Protected paths that do not exist yet cannot be created from the
// sandbox either (placeholders stand in while the box lives, and go with
// it); existing ones cannot be changed.
func TestEscapeCreateProtectedPaths(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	for _, present := range []bool{false, true} {
		t.Run(fmt.Sprintf("present=%v", present), func(t *testing.T) {
			t.Parallel()
			l := newLayout(t)
			files := map[string]string{}
			if present {
				files = map[string]string{".git/config": "[core]\n", ".deputy/deputy.db": "db",
					".claude/agents/a.md": "---\nname: a\n---\n", "deputy.yaml": "tiers: {}\n"}
				for rel, body := range files {
					writeFile(t, filepath.Join(l.ws, rel), body)
				}
			}
			before := treeDigest(t, l.ws)
			// Unconfined, the same command plants everything: the attempts
			// are real.
			ctl := t.TempDir()
			if out, _ := runBash(context.Background(), plainBash(t, shell.Config{Dir: ctl}), plantCommand, 30); !strings.Contains(out, "done") || !exists(filepath.Join(ctl, ".claude/agents/general-purpose.md")) || !exists(filepath.Join(ctl, "deputy.yaml")) {
				t.Fatalf("control: the command plants nothing unconfined: %q", out)
			}

			b, err := New(Policy{Workspace: l.ws, Protect: protectedForTest})
			if err != nil {
				t.Fatal(err)
			}
			out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), plantCommand, 30)
			if isErr || !strings.Contains(out, "done") {
				b.Close()
				t.Fatalf("the command did not run to its end: %q", out)
			}
			if got := readFile(t, filepath.Join(l.ws, "fine.txt")); got != "ok\n" {
				t.Errorf("the rest of the workspace is not writable: %q", got)
			}
			for _, rel := range []string{".claude/agents/general-purpose.md", ".claude/settings.json", ".claude/settings.local.json", ".deputy/agents/x.md", ".git/hooks/post-checkout"} {
				if exists(filepath.Join(l.ws, rel)) {
					t.Errorf("%s was planted from the sandbox", rel)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(l.ws, "fine.txt")); err != nil {
				t.Fatal(err)
			}
			// After Close the workspace is as it was: no placeholder left.
			if after := treeDigest(t, l.ws); after != before {
				ents, _ := os.ReadDir(l.ws)
				t.Errorf("the workspace changed (entries now %v)", ents)
			}
			for rel, body := range files {
				if got := readFile(t, filepath.Join(l.ws, rel)); got != body {
					t.Errorf("%s was changed from the sandbox: %q", rel, got)
				}
			}
		})
	}
}

// A container's snapshot never applies protected paths that did not
// exist when it was taken (the placeholders in the copy, and what a file
// tool wrote there), and never copies hidden ones.
func TestContainerSnapshotKeepsAbsentProtectedPaths(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, ".deputy", "deputy.db"), "transcripts")
	b := newBox(t, Policy{Workspace: ws, Snapshot: true, Protect: protectedForTest, Hide: []string{".deputy/"}})
	if exists(filepath.Join(b.Dir(), ".deputy", "deputy.db")) {
		t.Error("the snapshot copied a hidden path")
	}
	writeFile(t, filepath.Join(b.Dir(), ".claude", "agents", "general-purpose.md"), "---\nname: general-purpose\n---\n")
	if err := os.WriteFile(filepath.Join(b.Dir(), "deputy.yaml"), []byte("isolation: {allow_unsandboxed: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(b.Dir(), "work.txt"), "done")
	ch, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".claude", "deputy.yaml", ".git"} {
		if exists(filepath.Join(ws, rel)) {
			t.Errorf("the commit applied %s", rel)
		}
	}
	if got := readFile(t, filepath.Join(ws, "work.txt")); got != "done" || len(ch.Added) != 1 {
		t.Errorf("work.txt %q, changes %+v", got, ch)
	}
	if got := readFile(t, filepath.Join(ws, ".deputy", "deputy.db")); got != "transcripts" {
		t.Errorf("the database is now %q", got)
	}
}

// A hidden path cannot be read, listed or written from the sandbox; a
// protected symlink is refused, since the link could be replaced.
func TestEscapeHiddenPaths(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, ".deputy", "deputy.db"), secretText)
	writeFile(t, filepath.Join(ws, "secret.conf"), secretText)
	b := newBox(t, Policy{Workspace: ws, Hide: []string{".deputy/", "secret.conf", "absent.conf"}})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}),
		`cat .deputy/deputy.db secret.conf; ls -la .deputy; grep -rs s3cr3t .; echo x > .deputy/new; echo x > absent.conf; `+
			`rm -rf .deputy; echo done`, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	if strings.Contains(out, secretText) || strings.Contains(out, " deputy.db\n") {
		t.Errorf("a hidden path was read:\n%s", out)
	}
	if exists(filepath.Join(ws, ".deputy", "new")) || readFile(t, filepath.Join(ws, ".deputy", "deputy.db")) != secretText {
		t.Error("a hidden directory was written")
	}
	if got := readFile(t, filepath.Join(ws, "absent.conf")); got != "" {
		t.Errorf("a hidden absent file was written: %q", got)
	}

	if err := os.Symlink("elsewhere", filepath.Join(ws, "deputy.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Policy{Workspace: ws, Protect: []string{"deputy.yaml"}}); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("a protected symlink: %v", err)
	}
}

// When deputy runs as root the sandbox user is host root (uid 65534
// inside maps to 0), and would own every root-only file: what others may
// not read in the system directories is masked, wherever it lies, not only
// in /etc.
func TestEscapeRootOnlyFiles(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only root owns root's 0600 files; as another user the kernel refuses them to the sandbox anyway")
	}
	dir, err := os.MkdirTemp("/opt", "deputy-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // MkdirTemp's 0700 would hide it all
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "root-only.key"), secretText)
	if err := os.Chmod(filepath.Join(dir, "root-only.key"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "private", "inside.txt"), secretText+"-in-a-private-dir")
	if err := os.Chmod(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "public.txt"), "public")
	cmd := fmt.Sprintf(`cat /proc/self/uid_map; cat %[1]s/root-only.key %[1]s/private/inside.txt %[1]s/public.txt; ls %[1]s/private; echo; echo done`, dir)
	// Unconfined, root reads them: the attempt is real.
	if out, _ := runBash(context.Background(), plainBash(t, shell.Config{Dir: t.TempDir()}), cmd, 30); !strings.Contains(out, secretText) {
		t.Fatalf("control: root cannot read its own file: %q", out)
	}
	b := newBox(t, Policy{Workspace: t.TempDir()})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	if !strings.Contains(out, "65534          0          1") {
		t.Logf("the sandbox user is not host root here: %q", out)
	}
	if strings.Contains(out, secretText) || strings.Contains(out, "\ninside.txt\n") {
		t.Errorf("a root-only file under /opt was read from the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "public") {
		t.Errorf("a world-readable file under /opt is not readable: %q", out)
	}
}

// The memory limit is the box's, not each process's: processes that each
// stay far below it are killed once together they pass it, the command
// says why, and the host does not notice.
func TestEscapeMemoryPerBox(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), MemoryBytes: 64 << 20})
	if !b.cg.HasMemory() {
		missing(t, "no memory cgroup here, so the limit is per process: "+b.Limits())
	}
	set := sandboxedBash(t, b, shell.Config{Env: env})
	// One process of 20 MiB is fine.
	hold := `perl -e '$x = "x" x (20<<20); sleep 1; print "held\n"'`
	if out, _ := runBash(context.Background(), set, hold, 60); !strings.Contains(out, "held") {
		t.Fatalf("20 MiB under a 64 MiB limit: %q", out)
	}
	// Six at once are 120 MiB.
	out, _ := runBash(context.Background(), set, strings.Repeat(hold+" & ", 6)+"wait; echo done", 60)
	if n := strings.Count("\n"+out, "\nheld\n"); n == 6 {
		t.Errorf("6 processes of 20 MiB each ran under a 64 MiB limit: %q", out)
	}
	if !strings.Contains(out, "the memory limit (64 MiB for the sandbox) killed") {
		t.Errorf("want the memory limit named: %q", out)
	}
	responsive(t)
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes survived: %v", live)
	}
}

// Without limits in the Policy a box still has them: memory, CPU
// bandwidth, CPU time and processes.
func TestSandboxDefaultLimits(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	b := newBox(t, Policy{Workspace: t.TempDir()})
	out, _ := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), `ulimit -t; ulimit -d`, 30)
	if !strings.Contains(out, fmt.Sprint(DefaultCPUSeconds)) {
		t.Errorf("ulimit -t: %q", out)
	}
	if b.cg.HasMemory() {
		file := "memory.limit_in_bytes"
		if b.cg.V2("memory") {
			file = "memory.max"
		}
		if got := strings.TrimSpace(readFile(t, filepath.Join(b.cg.Dir("memory"), file))); got != fmt.Sprint(DefaultMemoryBytes()) {
			t.Errorf("%s is %s, want %d", file, got, DefaultMemoryBytes())
		}
	} else if !strings.Contains(out, fmt.Sprint(DefaultMemoryBytes()>>10)) {
		t.Errorf("no memory cgroup, and ulimit -d is not the default: %q (%s)", out, b.Limits())
	}
	if b.cg.HasCPU() {
		file, want := "cpu.cfs_quota_us", fmt.Sprint(int64(DefaultCPUs()*cgroup.CPUPeriod))
		if b.cg.V2("cpu") {
			file, want = "cpu.max", fmt.Sprintf("%d %d", int64(DefaultCPUs()*cgroup.CPUPeriod), cgroup.CPUPeriod)
		}
		if got := strings.TrimSpace(readFile(t, filepath.Join(b.cg.Dir("cpu"), file))); got != want {
			t.Errorf("%s is %s, want %s", file, got, want)
		}
	}
	for _, want := range []string{"MiB of memory", "s of CPU time per process"} {
		if !strings.Contains(b.Description(), want) {
			t.Errorf("description %q lacks %q", b.Description(), want)
		}
	}
}

// A box that spins is held to its CPU share.
func TestSandboxCPUBandwidth(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), CPUs: 0.1})
	if !b.cg.HasCPU() {
		missing(t, "no CPU cgroup here: "+b.Limits())
	}
	out, _ := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}),
		`timeout 1 bash -c 'while :; do :; done'; echo done`, 30)
	if !strings.Contains(out, "done") {
		t.Fatalf("%q", out)
	}
	if n := b.cg.Throttled(); n == 0 {
		t.Errorf("a busy loop of 1 s under a 0.1 CPU quota was never throttled (%s)", b.Limits())
	}
}

// Where no memory cgroup can be made the memory limit is each process's
// RLIMIT_DATA: filling memory fails there too.
func TestSandboxMemoryFallback(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	b := newBox(t, Policy{Workspace: t.TempDir(), MemoryBytes: 100 << 20, forceWatchdog: true})
	if b.cg.HasMemory() || !strings.Contains(b.Limits(), "memory: RLIMIT_DATA per process") {
		t.Fatalf("limits: %s", b.Limits())
	}
	set := sandboxedBash(t, b, shell.Config{})
	out, _ := runBash(context.Background(), set, `ulimit -d; x=$(head -c 10000000 /dev/zero | tr '\0' x); echo len=${#x}`, 60)
	if !strings.Contains(out, fmt.Sprint(100<<10)) || !strings.Contains(out, "len=10000000") {
		t.Fatalf("a 10 MB string under a 100 MB limit: %q", out)
	}
	out, _ = runBash(context.Background(), set, `x=$(head -c 2000000000 /dev/zero | tr '\0' x); echo len=${#x}`, 60)
	if strings.Contains(out, "len=2000000000") || !strings.Contains(out, "cannot allocate") {
		t.Errorf("want an allocation failure: %q", out)
	}
	responsive(t)
}

// A deputy that dies with a box open leaves its placeholders; Sweep, at
// the next worker's recovery, removes those still empty and its own.
func TestSandboxSweepPlaceholders(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), t.TempDir()
	_, ps, err := makePlaceholders(ws, []guard{{rel: "deputy.yaml"}, {rel: ".claude", dir: true}, {rel: "kept.yaml"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "kept.yaml"), "the user's now")
	rec, err := recordPlaceholders(state, ps)
	if err != nil {
		t.Fatal(err)
	}
	// As if written by a process that is gone (a pid above pid_max's
	// default range).
	dead := filepath.Join(state, "deputy-guard-4194304-1")
	if err := os.Rename(rec, dead); err != nil {
		t.Fatal(err)
	}
	if err := Sweep(state); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(ws, "deputy.yaml")) || exists(filepath.Join(ws, ".claude")) || exists(dead) {
		t.Error("the dead box's placeholders or record were left")
	}
	if got := readFile(t, filepath.Join(ws, "kept.yaml")); got != "the user's now" {
		t.Errorf("a filled placeholder was removed: %q", got)
	}
}

// The read-only mounts over the protected paths cannot be taken off from
// inside: no umount (capabilities dropped), no new user and mount
// namespace in which to do it (--disable-userns), and no move of the
// workspace's entries over them, so nothing is planted behind them.
func TestEscapeUnmountProtected(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	b, err := New(Policy{Workspace: ws, Protect: protectedForTest})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const cmd = `umount -l .claude; umount -l deputy.yaml; umount -l .deputy; ` +
		`unshare -rm sh -c 'umount -l .claude; mkdir -p .claude/agents; echo planted > .claude/agents/p.md'; ` +
		`mkdir -p .claude/agents; echo planted > .claude/agents/p.md; echo planted > deputy.yaml; ` +
		`mv -f . ../elsewhere; echo done`
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{}), cmd, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	if exists(filepath.Join(ws, ".claude/agents/p.md")) {
		t.Errorf("a definition was planted behind an unmounted placeholder:\n%s", out)
	}
	if fi, err := os.Stat(filepath.Join(ws, "deputy.yaml")); err == nil && fi.Size() != 0 {
		t.Errorf("deputy.yaml was written:\n%s", out)
	}
}

// A root-only entry of the system masked when the box was made, and
// removed from the host since, does not break the box's later commands:
// the mask over it would need a mount point bwrap cannot make in the
// read-only system (seen when another test removed its /opt directory
// while this box was alive). Not parallel: every root box made while the
// directory exists masks it too, and a command of another test's box
// that starts as it goes fails the same way, between the box's check and
// bwrap's mount, a window no check before the command can close.
func TestMaskedPathRemovedLater(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only root's boxes mask root-only entries of the system")
	}
	dir, err := os.MkdirTemp("/opt", "deputy-mask-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := New(Policy{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	set := sandboxedBash(t, b, shell.Config{})
	if out, isErr := runBash(context.Background(), set, "echo first", 30); isErr || !strings.Contains(out, "first") {
		t.Fatalf("first command: %q", out)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if out, isErr := runBash(context.Background(), set, "echo second", 30); isErr || !strings.Contains(out, "second") {
		t.Fatalf("a command after the masked path went: %q", out)
	}
}
