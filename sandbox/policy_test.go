package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSandboxPolicyErrors(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	file := filepath.Join(ws, "f")
	writeFile(t, file, "x")
	rootfs := t.TempDir()
	inside := filepath.Join(rootfs, "ws")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{}, "no workspace"},
		{Policy{Workspace: "/"}, "host's root directory"},
		{Policy{Workspace: filepath.Join(ws, "missing")}, "no such file"},
		{Policy{Workspace: file}, "not a directory"},
		{Policy{Workspace: ws, WritePaths: []string{"/"}}, "host's root directory"},
		{Policy{Workspace: ws, ReadPaths: []string{filepath.Join(ws, "nope")}}, "read path"},
		{Policy{Workspace: ws, RootFS: file}, "not a directory"},
		{Policy{Workspace: inside, RootFS: rootfs}, "inside the root filesystem"},
		{Policy{Workspace: ws, MaxProcesses: -1}, "negative"},
		{Policy{Workspace: "a\x00b"}, "NUL"},
		{Policy{Workspace: ws, StateDir: filepath.Join(ws)}, "lies in the workspace"},
	} {
		_, err := New(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.p, err, tc.want)
		}
	}
}

// Without bubblewrap a box is refused, with the way to install it: never
// a silent fallback to running unconfined.
func TestSandboxMissingBwrap(t *testing.T) {
	t.Parallel()
	_, err := New(Policy{Workspace: t.TempDir(), Bwrap: "/nonexistent/bwrap"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("got %v", err)
	}
	r := Check("/nonexistent/bwrap", "")
	if err := r.Sandbox(); err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("Check: %v\n%s", err, r)
	}
	if !strings.Contains(r.String(), "MISSING bubblewrap") {
		t.Errorf("report:\n%s", r)
	}
}

func TestSandboxCheck(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	rootfs := t.TempDir()
	writeFile(t, filepath.Join(rootfs, "bin", "sh"), "")
	r := Check("", rootfs)
	names := []string{}
	for _, it := range r.Items {
		names = append(names, it.Name)
		if !it.OK && it.Fix == "" {
			t.Errorf("%s is missing with no fix", it.Name)
		}
	}
	if want := []string{"bubblewrap", "user namespaces", "cgroup pids", "cgroup memory", "cgroup cpu", "Landlock", "root filesystem"}; !slices.Equal(names, want) {
		t.Errorf("items %v, want %v", names, want)
	}
	if err := r.Sandbox(); err != nil {
		t.Errorf("Available() works but the report says %v", err)
	}
	if err := r.Container(); err != nil {
		t.Errorf("container: %v\n%s", err, r)
	}
	if !strings.Contains(r.find("bubblewrap").Detail, "bubblewrap") {
		t.Errorf("no version: %+v", r.find("bubblewrap"))
	}
	// The cgroup item agrees with what a box gets.
	b := newBox(t, Policy{Workspace: t.TempDir()})
	for c, has := range map[string]bool{"pids": b.cg.HasPids(), "memory": b.cg.HasMemory(), "cpu": b.cg.HasCPU()} {
		if got := r.find("cgroup " + c).OK; got != has {
			t.Errorf("report says cgroup %s %v, the box %s", c, got, b.Limits())
		}
	}
	if err := Check("", "").Container(); err == nil || !strings.Contains(err.Error(), "debootstrap") {
		t.Errorf("no root filesystem: %v", err)
	}
	if err := Check("", t.TempDir()).Container(); err == nil || !strings.Contains(err.Error(), "no bin/sh") {
		t.Errorf("empty root filesystem: %v", err)
	}
}

// A root below an entry of the root filesystem turns that entry into a
// directory of binds, so bwrap can make the mount point.
func TestSandboxMountPlan(t *testing.T) {
	t.Parallel()
	rootfs := t.TempDir()
	for _, d := range []string{"srv/data", "srv/other", "usr/bin", "proc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/bin", filepath.Join(rootfs, "bin")); err != nil {
		t.Fatal(err)
	}
	p := Policy{RootFS: rootfs}
	args, err := mountArgs(p, []root{{path: "/srv/data/ws", writable: true}, {path: "/srv/other", writable: false}}, "")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	for _, want := range []string{
		"--symlink usr/bin /bin",
		"--dir /srv --dir /srv/data",
		"--ro-bind " + rootfs + "/usr /usr",
		"--proc /proc --dev /dev --tmpfs /tmp",
		"--bind /srv/data/ws /srv/data/ws --ro-bind /srv/other /srv/other",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	for _, bad := range []string{rootfs + "/srv /srv", rootfs + "/proc", rootfs + "/srv/other /srv/other"} {
		if strings.Contains(got, bad) {
			t.Errorf("unexpected %q in\n%s", bad, got)
		}
	}
}

// Without a root filesystem the system is the host's system directories,
// not its whole /: homes, /root, /var, /run and /tmp stay out.
func TestSandboxHostSystem(t *testing.T) {
	t.Parallel()
	args, err := mountArgs(Policy{}, []root{{path: "/srv/ws", writable: true}}, "/var/tmp/box")
	if err != nil {
		t.Fatal(err)
	}
	got := " " + strings.Join(args, " ") + " "
	if !strings.Contains(got, " /usr /usr ") || !strings.Contains(got, " --bind /var/tmp/box /tmp ") {
		t.Errorf("no /usr or /tmp: %s", got)
	}
	for _, bad := range []string{" / / ", " /root ", " /home ", " /var ", " /run "} {
		if strings.Contains(got, bad) {
			t.Errorf("%q mounted: %s", bad, got)
		}
	}
	if os.Geteuid() == 0 {
		if _, err := os.Stat("/etc/shadow"); err == nil && !strings.Contains(got, "--ro-bind /dev/null /etc/shadow") {
			t.Errorf("/etc/shadow not masked for root: %s", got)
		}
	}
}

func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	b := &Box{roots: []root{{path: "/srv/ws"}}, p: Policy{Env: []string{"X"}}}
	// Only the allowlist and the policy's own names pass: a database URL
	// with its password, a cloud key, anything else stays out.
	got := b.env([]string{"HOME=/root", "TMPDIR=/var/tmp", "PATH=/usr/bin", "X=1", "LC_ALL=C",
		"DEPUTY_DB=postgres://deputy:hunter2@db/deputy", "AWS_ACCESS_KEY_ID=AKIA", "DATABASE_URL=postgres://u:p@h/d"})
	want := []string{"PATH=/usr/bin", "X=1", "LC_ALL=C", "HOME=/tmp", "TMPDIR=/tmp"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got = b.env([]string{"HOME=/srv/ws/home", "TMPDIR=/tmp"})
	if want := []string{"HOME=/srv/ws/home", "TMPDIR=/tmp"}; !slices.Equal(got, want) {
		t.Errorf("visible HOME and TMPDIR changed: %v", got)
	}
	// Below /tmp is the host's /tmp, not the box's.
	got = b.env([]string{"TMPDIR=/tmp/host-only"})
	if want := []string{"HOME=/tmp", "TMPDIR=/tmp"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
