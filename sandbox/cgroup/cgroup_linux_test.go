package cgroup

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A hybrid host (v1 controllers, an empty v2 hierarchy beside them) as
// /proc/self/cgroup and /proc/self/mountinfo show it: the controllers
// are found on v1, each at this process's own cgroup.
func TestParseHybrid(t *testing.T) {
	t.Parallel()
	own := "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/1c0e\n1:cpu,cpuacct:/\n0::/\n"
	mounts := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	v1, v2, haveV2 := parseOwnCgroups(own)
	if want := map[string]string{"name=systemd": "/", "pids": "/", "memory": "/process_api/1c0e", "cpu": "/", "cpuacct": "/", "": "/"}; !maps.Equal(v1, want) {
		t.Errorf("own v1 cgroups %v, want %v", v1, want)
	}
	if !haveV2 || v2 != "/" {
		t.Errorf("own v2 cgroup %q %v, want / true", v2, haveV2)
	}
	m1, m2 := parseCgroupMounts(mounts)
	if got := m1["cpu"]; got != (mount{dir: "/sys/fs/cgroup/cpu,cpuacct", root: "/"}) {
		t.Errorf("cpu mount %+v", got)
	}
	if got := m1["memory"]; got.dir != "/sys/fs/cgroup/memory" {
		t.Errorf("memory mount %+v", got)
	}
	if _, ok := m1["tmpfs"]; ok {
		t.Error("a tmpfs was taken for a cgroup hierarchy")
	}
	if m2 != (mount{dir: "/sys/fs/cgroup/unified", root: "/"}) {
		t.Errorf("v2 mount %+v", m2)
	}
}

// Inside a cgroup namespace the mount shows a cgroup other than "/" at
// its directory, and a process's path is relative to that.
func TestRelTo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ p, root, want string }{
		{"/a/b", "/", "/a/b"},
		{"/ns/a", "/ns", "/a"},
		{"/other", "/ns", "/other"}, // not below the root: taken as it is
	} {
		if got := relTo(c.p, c.root); got != c.want {
			t.Errorf("relTo(%q, %q) = %q, want %q", c.p, c.root, got, c.want)
		}
	}
}

// fakeDir makes a directory holding the named files, empty, as a cgroup
// directory holds its control files before anything is written to them.
func fakeDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each controller's limit is written the way its hierarchy spells it,
// swap held to nothing beyond the memory limit where the kernel has it.
func TestLimitFiles(t *testing.T) {
	t.Parallel()
	l := Limits{Tasks: 64, Memory: 256 << 20, CPUs: 1.5}
	mem := fmt.Sprint(256 << 20)
	for _, c := range []struct {
		name, controller string
		v2               bool
		files            []string
		want             map[string]string
	}{
		{"pids", "pids", true, []string{"pids.max"}, map[string]string{"pids.max": "64"}},
		{"memory v2", "memory", true, []string{"memory.max", "memory.swap.max"},
			map[string]string{"memory.max": mem, "memory.swap.max": "0"}},
		{"memory v2 without swap accounting", "memory", true, []string{"memory.max"},
			map[string]string{"memory.max": mem}},
		{"memory v1", "memory", false, []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"},
			map[string]string{"memory.limit_in_bytes": mem, "memory.memsw.limit_in_bytes": mem}},
		{"cpu v2", "cpu", true, []string{"cpu.max"}, map[string]string{"cpu.max": "150000 100000"}},
		{"cpu v1", "cpu", false, []string{"cpu.cfs_period_us", "cpu.cfs_quota_us"},
			map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "150000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := fakeDir(t, c.files...)
			if err := limit(c.controller, dir, c.v2, l); err != nil {
				t.Fatal(err)
			}
			for file, want := range c.want {
				if got := read(t, dir, file); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
			// Nothing else: no file the kernel does not have is made.
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != len(c.want) {
				t.Errorf("%d files in the cgroup, want %d: %v", len(ents), len(c.want), ents)
			}
		})
	}
}

// A limit the box was not given is no limit: the controller is reported
// missing, with why, rather than set to nothing.
func TestLimitNotAsked(t *testing.T) {
	t.Parallel()
	dir := fakeDir(t, "memory.max", "cpu.max")
	if err := limit("memory", dir, true, Limits{Tasks: 1}); err == nil || !strings.Contains(err.Error(), "no memory limit") {
		t.Errorf("memory: %v", err)
	}
	if err := limit("cpu", dir, true, Limits{Tasks: 1}); err == nil || !strings.Contains(err.Error(), "no CPU limit") {
		t.Errorf("cpu: %v", err)
	}
}

// The counters read their line of a flat keyed file, and a nil Group
// (no cgroup could be made) answers for every controller that it has none.
func TestCountersAndNil(t *testing.T) {
	t.Parallel()
	dir := fakeDir(t)
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &Group{pids: dir, mem: dir, v2: map[string]bool{"memory": true}}
	if n := g.OOMKills(); n != 2 {
		t.Errorf("OOMKills = %d, want 2", n)
	}
	if n := g.Refused(); n != 7 {
		t.Errorf("Refused = %d, want 7", n)
	}
	if g.HasCPU() || g.Throttled() != 0 || g.Dir("cpu") != "" {
		t.Error("a Group without a CPU directory claims the controller")
	}
	var none *Group
	for _, c := range Controllers {
		if none.Dir(c) != "" || none.V2(c) {
			t.Errorf("nil Group has %s", c)
		}
	}
	if none.HasPids() || none.HasMemory() || none.HasCPU() {
		t.Error("nil Group claims a controller")
	}
}

// sweep removes the cgroups of deputy processes that are gone, and only
// those: this process's, a live process's and other names stay.
func TestSweep(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dead := "999999999-1" // above any pid_max: no such process
	mine := fmt.Sprintf("%d-1", os.Getpid())
	keep := []string{mine, "1-1", "not-a-box"}
	for _, n := range append([]string{dead}, keep...) {
		if err := os.Mkdir(filepath.Join(base, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweep(base)
	if _, err := os.Stat(filepath.Join(base, dead)); !os.IsNotExist(err) {
		t.Errorf("a dead process's cgroup stayed: %v", err)
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(base, n)); err != nil {
			t.Errorf("%s was swept: %v", n, err)
		}
	}
}

// On this host New makes what it can: each controller it reports has its
// limit written, each it does not has a reason, and Remove leaves nothing.
func TestNewHere(t *testing.T) {
	t.Parallel()
	g, why := New(Limits{Tasks: 32, Memory: 128 << 20, CPUs: 1})
	if g == nil {
		t.Skipf("no cgroup can be made here: %v", why)
	}
	dirs := map[string]bool{}
	for _, c := range Controllers {
		dir := g.Dir(c)
		if dir == "" {
			if why[c] == nil {
				t.Errorf("%s is missing without a reason", c)
			}
			continue
		}
		dirs[dir] = true
		if c == "pids" {
			if got := strings.TrimSpace(read(t, dir, "pids.max")); got != "32" {
				t.Errorf("pids.max = %q", got)
			}
		}
	}
	if g.Tasks() != 0 {
		t.Errorf("a new box's cgroup has %d tasks", g.Tasks())
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", dir, err)
		}
	}
}
