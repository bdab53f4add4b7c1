package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
	"github.com/deputy-run/deputy/tool/shell"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func repo(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, ws, "init", "-q", "-b", "main")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "start")
	return ws
}

func fencer(ws string, iso agentdef.IsolationConfig, stateDir string) *fence.Fencer {
	return &fence.Fencer{Workspace: ws, Config: iso, StateDir: stateDir,
		Tools: func(dir string, sb shell.Sandbox) (*tool.Set, error) {
			tools, err := builtin.Tools(builtin.Config{Workspace: dir, Sandbox: sb, ReadOnly: fence.Protected, Hidden: fence.Hidden})
			if err != nil {
				return nil, err
			}
			return tool.NewSet(tools...)
		}}
}

func call(t *testing.T, set *tool.Set, name, input string) (string, bool) {
	t.Helper()
	return set.Call(context.Background(), name, json.RawMessage(input))
}

// A sandboxed child in a worktree: its commands run confined to the
// worktree, its work lands on its branch when kept, and the parent's tree
// never sees it.
func TestWorktreeSandboxFence(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	ws := repo(t)
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	def := &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox, Worktree: true}
	if err := f.Check(def); err != nil {
		t.Fatal(err)
	}
	fc, err := f.Fence(context.Background(), "i-1", def)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fc.Instructions, "branch deputy/i-1") || !strings.Contains(fc.Instructions, "Commands run in a sandbox") {
		t.Errorf("instructions %q", fc.Instructions)
	}
	out, isErr := call(t, fc.Tools, "bash", `{"command":"echo made > b.txt && echo escaped > `+filepath.Join(ws, "x.txt")+`; id -u"}`)
	if !strings.Contains(out, "65534") {
		t.Errorf("bash in the fence: %q (error %v)", out, isErr)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); err == nil {
		t.Fatal("a sandboxed command wrote into the parent's tree")
	}
	if out, isErr := call(t, fc.Tools, "read_file", `{"path":"b.txt"}`); isErr || !strings.Contains(out, "made") {
		t.Errorf("the file tools do not see the fence's files: %q", out)
	}
	if out, _ := call(t, fc.Tools, "bash", `{"command":"git status --short; git log --oneline | wc -l; echo x >> ../../hooks/pre-commit; test -e ../../hooks/pre-commit && echo planted || echo absent"}`); !strings.Contains(out, "?? b.txt") || !strings.Contains(out, "absent") {
		t.Errorf("git in the sandboxed worktree: %q", out)
	}
	// Its .git (here the worktree's pointer file) and deputy's files are
	// out of reach of its programs and of its file tools.
	if out, _ := call(t, fc.Tools, "bash", `{"command":"echo 'gitdir: /tmp/evil' > .git; mkdir -p .deputy/agents; cat .git"}`); !strings.Contains(out, "gitdir: ") || strings.Contains(out, "/tmp/evil") {
		t.Errorf("bash rewrote .git: %q", out)
	}
	for _, p := range []string{".git", ".deputy/agents/x.md", "deputy.yaml"} {
		// .deputy/ is hidden as well as protected: hidden says it first.
		out, isErr := call(t, fc.Tools, "write_file", `{"path":"`+p+`","content":"x"}`)
		if !isErr || !strings.Contains(out, "read-only here") && !strings.Contains(out, "is hidden") {
			t.Errorf("write_file %s: %q", p, out)
		}
	}
	arts, err := fc.End(context.Background(), true)
	if err != nil || len(arts) != 1 || !strings.HasPrefix(arts[0], "branch deputy/i-1: 1 file, +1 -0") {
		t.Fatalf("end: %v %v", arts, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); err == nil {
		t.Error("the child's file reached the parent's tree without a merge")
	}
	if show := git(t, ws, "show", "deputy/i-1:b.txt"); show != "made\n" {
		t.Errorf("the branch holds %q", show)
	}
}

// What cannot be built is refused with its fix; nothing is left behind.
func TestFenceChecks(t *testing.T) {
	t.Parallel()
	plain := t.TempDir()
	f := fencer(plain, agentdef.IsolationConfig{}, t.TempDir())
	err := f.Check(&agentdef.Definition{Name: "w", Worktree: true})
	if err == nil || !strings.Contains(err.Error(), "is not a git repository: worktree isolation needs one") {
		t.Errorf("worktree outside a repository: %v", err)
	}
	err = f.Check(&agentdef.Definition{Name: "c", Isolation: agentdef.IsolationContainer})
	if err == nil || !strings.Contains(err.Error(), "set isolation.rootfs in deputy.yaml") {
		t.Errorf("container without a root filesystem: %v", err)
	}
	f.Config.RootFS = plain // no shell in it
	err = f.Check(&agentdef.Definition{Name: "c", Isolation: agentdef.IsolationContainer})
	if err == nil || !strings.Contains(err.Error(), "has no bin/sh") {
		t.Errorf("container over a directory that is no root filesystem: %v", err)
	}
	if err := f.Check(&agentdef.Definition{Name: "n"}); err != nil {
		t.Errorf("no fence asked: %v", err)
	}
}

// A dropped fence (the child failed) leaves the parent's tree as it was
// and no branch behind.
func TestWorktreeFenceDropped(t *testing.T) {
	t.Parallel()
	ws := repo(t)
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	fc, err := f.Fence(context.Background(), "i-2", &agentdef.Definition{Name: "w", Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := call(t, fc.Tools, "write_file", `{"path":"a.txt","content":"changed\n"}`); isErr {
		t.Fatal(out)
	}
	if arts, err := fc.End(context.Background(), false); err != nil || len(arts) != 0 {
		t.Fatalf("end: %v %v", arts, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "a\n" {
		t.Errorf("a.txt is %q", b)
	}
	if br := git(t, ws, "branch", "--list", "deputy/*"); br != "" {
		t.Errorf("branches left: %q", br)
	}
}

// A fence whose process died (no End) is removed by Prune once its
// instance is no longer alive, and kept while it is.
func TestWorktreeFencePrunedAfterItsInstance(t *testing.T) {
	t.Parallel()
	ws := repo(t)
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	if _, err := f.Fence(context.Background(), "i-3", &agentdef.Definition{Name: "w", Worktree: true}); err != nil {
		t.Fatal(err)
	}
	if gone, err := fence.Prune(context.Background(), ws, func(string) bool { return true }); err != nil || len(gone) != 0 {
		t.Fatalf("pruned a live instance's worktree: %v %v", gone, err)
	}
	gone, err := fence.Prune(context.Background(), ws, func(string) bool { return false })
	if err != nil || len(gone) != 1 || gone[0] != "i-3" {
		t.Fatalf("prune: %v %v", gone, err)
	}
	if list := git(t, ws, "worktree", "list"); strings.Count(list, "\n") != 1 {
		t.Errorf("worktrees:\n%s", list)
	}
	if gone, err := fence.Prune(context.Background(), t.TempDir(), func(string) bool { return false }); err != nil || gone != nil {
		t.Errorf("a workspace that is no repository: %v %v", gone, err)
	}
}

// Without bubblewrap a sandbox type is refused with how to install it;
// when the config allows running unsandboxed, it runs so and its relay
// will say it.
func TestSandboxFenceWithoutBwrap(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	f.Bwrap = filepath.Join(t.TempDir(), "no-bwrap")
	def := &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox}
	if err := f.Check(def); err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") ||
		!strings.Contains(err.Error(), "allow_unsandboxed") {
		t.Fatalf("check: %v", err)
	}
	f.Config.AllowUnsandboxed = true
	if err := f.Check(def); err != nil {
		t.Fatal(err)
	}
	fc, err := f.Fence(context.Background(), "i-4", def)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fc.Note, "WITHOUT its sandbox") || fc.Instructions != "" {
		t.Errorf("note %q, instructions %q", fc.Note, fc.Instructions)
	}
	if out, isErr := call(t, fc.Tools, "bash", `{"command":"echo unconfined"}`); isErr || !strings.Contains(out, "unconfined") {
		t.Errorf("bash: %q", out)
	}
	if _, err := fc.End(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
			t.Fatal(err) // CI installs bubblewrap (.ci/run)
		}
		t.Skip("bubblewrap cannot run here:", err)
	}
}

// The reproduction of the escape: a sandboxed child in a workspace with
// none of deputy's files tries to plant a definition and a deputy.yaml
// that turns the sandbox off, with its programs and with its file tools,
// and to read deputy's database. Nothing is planted, nothing read, and the
// workspace is as it was once the fence ends.
func TestSandboxFenceProtectsAbsentPaths(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	for _, present := range []bool{false, true} {
		t.Run(map[bool]string{false: "absent", true: "present"}[present], func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, ".deputy"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".deputy", "deputy.db"), []byte("SQLite transcripts"), 0o644); err != nil {
				t.Fatal(err)
			}
			if present {
				for rel, body := range map[string]string{".claude/agents/a.md": "---\nname: a\n---\n", "deputy.yaml": "tiers: {}\n",
					".git/config": "[core]\n", ".deputy/agents/b.md": "---\nname: b\n---\n"} {
					if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := listTree(t, ws)
			f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
			fc, err := f.Fence(context.Background(), "i-5", &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
			if err != nil {
				t.Fatal(err)
			}
			plant := `mkdir -p .claude/agents && printf -- '---\nname: general-purpose\nmcpServers: {h: {command: sh}}\n---\n' > .claude/agents/general-purpose.md; ` +
				`printf 'isolation:\n  allow_unsandboxed: true\n' > deputy.yaml; mkdir -p .deputy/agents; echo x > .deputy/agents/x.md; ` +
				`mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; cat .deputy/deputy.db; echo done`
			out, isErr := call(t, fc.Tools, "bash", `{"command":`+strconv.Quote(plant)+`}`)
			if isErr || !strings.Contains(out, "done") {
				t.Fatalf("bash: %q", out)
			}
			if strings.Contains(out, "SQLite transcripts") {
				t.Errorf("the database was read from the sandbox: %q", out)
			}
			if out, isErr := call(t, fc.Tools, "read_file", `{"path":".deputy/deputy.db"}`); !isErr || strings.Contains(out, "SQLite transcripts") {
				t.Errorf("read_file read the database: %q", out)
			}
			for _, p := range []string{".claude/agents/general-purpose.md", "deputy.yaml", ".deputy/agents/x.md", ".git/hooks/pre-commit", ".mcp/../deputy.yaml"} {
				// .deputy/ is hidden as well as protected: hidden says it first.
				out, isErr := call(t, fc.Tools, "write_file", `{"path":"`+p+`","content":"x"}`)
				if !isErr || !strings.Contains(out, "read-only here") && !strings.Contains(out, "is hidden") {
					t.Errorf("write_file %s: %q", p, out)
				}
			}
			arts, err := fc.End(context.Background(), true)
			if err != nil {
				t.Fatalf("end: %v %v", arts, err)
			}
			if after := listTree(t, ws); after != before {
				t.Errorf("the workspace changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// listTree lists a tree's paths with their sizes.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s:%d ", rel, fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A definition or configuration that appears in the workspace while a
// fenced child runs (here written from outside the fence, as a hole in
// it would) is not trusted silently: the child's end fails naming it, and
// its work is not kept.
func TestFenceTripwire(t *testing.T) {
	t.Parallel()
	ws := repo(t)
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	var warned []error
	f.Warn = func(err error) { warned = append(warned, err) }
	fc, err := f.Fence(context.Background(), "i-6", &agentdef.Definition{Name: "w", Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := call(t, fc.Tools, "write_file", `{"path":"b.txt","content":"work\n"}`); isErr {
		t.Fatal(out)
	}
	// The database and git's own files change in normal use: no alarm.
	if err := os.MkdirAll(filepath.Join(ws, ".deputy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".deputy", "deputy.db"), []byte("more"), 0o644); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(ws, ".claude", "agents", "general-purpose.md")
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, []byte("---\nname: general-purpose\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	arts, err := fc.End(context.Background(), true)
	var tw *fence.TripwireError
	if !errors.As(err, &tw) || len(tw.Changed) != 1 || tw.Changed[0] != planted {
		t.Fatalf("end: %v", err)
	}
	if len(arts) != 1 || !strings.Contains(arts[0], planted) || !strings.Contains(arts[0], "review them") {
		t.Errorf("artifacts %q", arts)
	}
	if br := git(t, ws, "branch", "--list", "deputy/*"); br != "" {
		t.Errorf("the work was kept on a branch: %q", br)
	}
	if len(warned) != 1 || !errors.As(warned[0], &tw) {
		t.Errorf("warned %v", warned)
	}
	// Recorded where the loader looks: no fence (and no start, see
	// internal/setup) until the user has reviewed it and removed it.
	marker := filepath.Join(ws, fence.UntrustedFile)
	if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), "i-6\t"+planted+"\n") {
		t.Fatalf("marker: %q %v", b, err)
	}
	var ue *fence.UntrustedError
	if err := fence.CheckTrusted(ws); !errors.As(err, &ue) || len(ue.Paths) != 1 || ue.Paths[0] != planted ||
		!strings.Contains(err.Error(), "i-6 at ") || !strings.Contains(err.Error(), "remove "+marker) {
		t.Fatalf("CheckTrusted: %v", err)
	}
	if _, err := f.Fence(context.Background(), "i-7", &agentdef.Definition{Name: "w", Worktree: true}); !errors.As(err, &ue) {
		t.Fatalf("a fence on an untrusted workspace: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	// Without a change the tripwire is silent.
	fc, err = f.Fence(context.Background(), "i-7", &agentdef.Definition{Name: "w", Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	if arts, err := fc.End(context.Background(), false); err != nil || len(arts) != 0 {
		t.Errorf("end: %v %v", arts, err)
	}
}

// A fence released without ending (its child asked, was paused, or its
// process closes) is checked too: the next run's fence would take the
// planted file as it found it. Recorded, warned, and the resumed run's
// fence refused.
func TestFenceTripwireOnRelease(t *testing.T) {
	t.Parallel()
	ws := repo(t)
	f := fencer(ws, agentdef.IsolationConfig{}, t.TempDir())
	var warned []error
	f.Warn = func(err error) { warned = append(warned, err) }
	def := &agentdef.Definition{Name: "w", Worktree: true}
	fc, err := f.Fence(context.Background(), "i-8", def)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(ws, "deputy.yaml")
	if err := os.WriteFile(planted, []byte("isolation: {allow_unsandboxed: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc.Release()
	var tw *fence.TripwireError
	if len(warned) != 1 || !errors.As(warned[0], &tw) || len(tw.Changed) != 1 || tw.Changed[0] != planted {
		t.Fatalf("warned %v", warned)
	}
	if b, err := os.ReadFile(filepath.Join(ws, fence.UntrustedFile)); err != nil || !strings.Contains(string(b), planted) {
		t.Fatalf("marker: %q %v", b, err)
	}
	var ue *fence.UntrustedError
	if _, err := f.Fence(context.Background(), "i-8", def); !errors.As(err, &ue) {
		t.Fatalf("the resumed run's fence: %v", err)
	}
	// Released and nothing changed: silent.
	ws2 := repo(t)
	f2 := fencer(ws2, agentdef.IsolationConfig{}, t.TempDir())
	f2.Warn = func(err error) { t.Errorf("warned %v", err) }
	fc, err = f2.Fence(context.Background(), "i-9", &agentdef.Definition{Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	fc.Release()
	if _, err := os.Stat(filepath.Join(ws2, fence.UntrustedFile)); err == nil {
		t.Error("a marker without a change")
	}
}

// deputy.yaml's isolation limits reach the child's sandbox: here its CPU
// bandwidth (isolation.cpus), memory and task limit, as the box tells the
// child in its instructions.
func TestSandboxFenceLimitsFromConfig(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	f := fencer(t.TempDir(), agentdef.IsolationConfig{CPUs: 0.5, MemoryMB: 96, Processes: 77}, t.TempDir())
	fc, err := f.Fence(context.Background(), "i-7", &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Release()
	say := fc.Instructions
	if !strings.Contains(say, "At most 77 processes") || !strings.Contains(say, "96 MiB") {
		t.Errorf("memory_mb or processes not applied: %q", say)
	}
	if !strings.Contains(say, "CPUs' worth") {
		t.Skip("no CPU cgroup here, so isolation.cpus has nothing to set:", say)
	}
	if !strings.Contains(say, "0.5 CPUs' worth of time") {
		t.Errorf("isolation.cpus not applied: %q", say)
	}
}
