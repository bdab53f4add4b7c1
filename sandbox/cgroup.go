//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroup is one Box's cgroups: a directory in each hierarchy holding a
// controller it uses (cgroup v1 mounts each controller on its own, or a
// few together; v2 has one hierarchy), into all of which every command's
// sandbox is moved. pids.max is its process-count limit, the memory
// controller's limit its memory, the CPU controller's quota its share of
// the CPUs: for the box as a whole, whatever its processes do.
type cgroup struct {
	dirs []string // the box's directory in each hierarchy
	pids string   // the directory with pids.*, or ""
	mem  string   // with memory.*, or ""
	cpu  string   // with cpu.*, or ""
	v2   map[string]bool
}

// hasPids reports whether the pids controller limits the box (else the
// watchdog does). It is nil-safe.
func (c *cgroup) hasPids() bool { return c != nil && c.pids != "" }

// hasMemory reports whether the memory controller limits the box (else
// each process has RLIMIT_DATA). It is nil-safe.
func (c *cgroup) hasMemory() bool { return c != nil && c.mem != "" }

// hasCPU reports whether the CPU controller limits the box. It is
// nil-safe.
func (c *cgroup) hasCPU() bool { return c != nil && c.cpu != "" }

// cgroupParent is the directory under deputy's own cgroup that holds the
// boxes' cgroups.
const cgroupParent = "deputy-sandbox"

var cgroupSeq atomic.Int64

// cgroupFix is the advice when no pids cgroup can be made.
const cgroupFix = "run deputy as root, or in a cgroup whose pids, memory and cpu controllers are delegated to it " +
	"(cgroup v2: systemd Delegate=yes, or `echo +pids +memory +cpu` into its parent's cgroup.subtree_control); " +
	"meanwhile a watchdog enforces the process limit and rlimits the memory limit per process"

// controllers are the ones a box uses, as cgroup v1 mount options and v2
// controller names spell them.
var controllers = []string{"pids", "memory", "cpu"}

// cgroupBase finds where each controller's hierarchy is and deputy's
// place in it: the directory under which box cgroups are made (created if
// needed, with the controllers enabled for its children on v2). cgroup
// v1 is preferred where a controller is on both (hybrid hosts keep them
// there). A controller found nowhere has an error saying why.
func cgroupBase() (map[string]string, map[string]bool, map[string]error, error) {
	pl, err := findCgroups()
	if err != nil {
		return nil, nil, nil, err
	}
	bases, v2, why := map[string]string{}, map[string]bool{}, map[string]error{}
	for _, c := range controllers {
		base, isV2, err := pl.base(c)
		if err != nil {
			why[c] = err
			continue
		}
		bases[c] = base
		if isV2 {
			v2[c] = true
		}
	}
	return bases, v2, why, nil
}

// cgroupMount is a cgroup hierarchy's mount: its directory, and the
// cgroup it shows there (not "/" inside a cgroup namespace).
type cgroupMount struct{ dir, root string }

// cgroupPlaces is where this process is in the cgroup hierarchies, as
// /proc/self/cgroup and /proc/self/mountinfo tell it.
type cgroupPlaces struct {
	v1Path map[string]string      // this process's v1 cgroup, by controller
	v1     map[string]cgroupMount // the v1 hierarchies, by mount option
	own2   string                 // its v2 cgroup's directory, "" without v2
	avail2 string                 // that cgroup's cgroup.controllers
}

// findCgroups reads where this process is in each cgroup hierarchy and
// where those are mounted.
func findCgroups() (cgroupPlaces, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupPlaces{}, fmt.Errorf("cgroups: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupPlaces{}, fmt.Errorf("cgroups: %w", err)
	}
	var pl cgroupPlaces
	var v2Path string
	var haveV2 bool
	pl.v1Path, v2Path, haveV2 = parseOwnCgroups(string(own))
	var v2 cgroupMount
	pl.v1, v2 = parseCgroupMounts(string(mounts))
	if haveV2 && v2.dir != "" {
		pl.own2 = filepath.Join(v2.dir, relTo(v2Path, v2.root))
		b, _ := os.ReadFile(filepath.Join(pl.own2, "cgroup.controllers"))
		pl.avail2 = string(b)
	}
	return pl, nil
}

// parseOwnCgroups reads /proc/self/cgroup: "ID:CONTROLLERS:PATH" lines,
// one per v1 hierarchy, and "0::PATH" for v2.
func parseOwnCgroups(s string) (v1 map[string]string, v2 string, haveV2 bool) {
	v1 = map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2, haveV2 = f[2], true
		}
		for _, c := range strings.Split(f[1], ",") {
			v1[c] = f[2]
		}
	}
	return v1, v2, haveV2
}

// parseCgroupMounts reads /proc/self/mountinfo for the cgroup mounts:
// each v1 hierarchy by its mount options (the controllers among them),
// and the first v2 one.
func parseCgroupMounts(s string) (v1 map[string]cgroupMount, v2 cgroupMount) {
	v1 = map[string]cgroupMount{}
	for _, line := range strings.Split(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				v1[o] = cgroupMount{dir: pf[4], root: pf[3]}
			}
		case "cgroup2":
			if v2.dir == "" {
				v2 = cgroupMount{dir: pf[4], root: pf[3]}
			}
		}
	}
	return v1, v2
}

// base makes controller c's base directory: on v1 where c is mounted
// there (hybrid hosts keep their controllers there), else on v2.
func (pl cgroupPlaces) base(c string) (dir string, isV2 bool, err error) {
	if p, ok := pl.v1Path[c]; ok && pl.v1[c].dir != "" {
		base := filepath.Join(pl.v1[c].dir, relTo(p, pl.v1[c].root), cgroupParent)
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", false, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
		return base, false, nil
	}
	base, err := pl.v2Base(c)
	return base, true, err
}

// v2Base makes controller c's base directory on v2, below this process's
// cgroup, with c enabled for the children of both: a box's cgroup can
// only use a controller its parent hands down.
func (pl cgroupPlaces) v2Base(c string) (string, error) {
	if pl.own2 == "" {
		return "", fmt.Errorf("no %s cgroup controller is mounted", c)
	}
	if !hasWord(pl.avail2, c) {
		return "", fmt.Errorf("cgroup v2: the %s controller is not available in %s", c, pl.own2)
	}
	base := filepath.Join(pl.own2, cgroupParent)
	err := enable(pl.own2, c)
	if err == nil {
		err = os.MkdirAll(base, 0o755)
	}
	if err == nil {
		err = enable(base, c)
	}
	if err != nil {
		return "", fmt.Errorf("cgroup v2: enable %s for %s's children: %w", c, pl.own2, err)
	}
	return base, nil
}

// relTo is a cgroup path relative to the mount's root (they differ inside
// a cgroup namespace).
func relTo(p, root string) string {
	if root == "/" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, root); ok {
		return rel
	}
	return p
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// enable turns a v2 controller on for dir's children, if it is not yet.
func enable(dir, controller string) error {
	cur, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && hasWord(string(cur), controller) {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+controller), 0)
}

// cgroupLimits are what a box's cgroups enforce.
type cgroupLimits struct {
	tasks int
	mem   int64
	cpus  float64
}

// newCgroup makes a box's cgroups with their limits, one per hierarchy
// holding a controller it can use. It returns nil when none could be made,
// and why each missing controller is missing. It also removes the empty
// cgroups left by deputy processes that died without closing their boxes.
func newCgroup(l cgroupLimits) (*cgroup, map[string]error) {
	bases, v2, why, err := cgroupBase()
	if err != nil {
		why = map[string]error{}
		for _, c := range controllers {
			why[c] = err
		}
		return nil, why
	}
	cg := &cgroup{v2: v2}
	made := map[string]string{} // base → the box's dir there
	name := fmt.Sprintf("%d-%d", os.Getpid(), cgroupSeq.Add(1))
	for _, c := range controllers {
		base, ok := bases[c]
		if !ok {
			continue
		}
		dir, ok := made[base]
		if !ok {
			sweep(base)
			dir = filepath.Join(base, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				why[c] = fmt.Errorf("cgroup: %w", err)
				continue
			}
			made[base] = dir
			cg.dirs = append(cg.dirs, dir)
		}
		if err := cg.limit(c, dir, v2[c], l); err != nil {
			why[c] = err
			continue
		}
		switch c {
		case "pids":
			cg.pids = dir
		case "memory":
			cg.mem = dir
		case "cpu":
			cg.cpu = dir
		}
	}
	if cg.pids == "" && cg.mem == "" && cg.cpu == "" {
		_ = cg.remove()
		return nil, why
	}
	return cg, why
}

// limit writes controller c's limit in dir.
func (cg *cgroup) limit(c, dir string, v2 bool, l cgroupLimits) error {
	w := func(file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		return nil
	}
	switch c {
	case "pids":
		return w("pids.max", strconv.Itoa(l.tasks))
	case "memory":
		if l.mem <= 0 {
			return errors.New("no memory limit asked")
		}
		m := strconv.FormatInt(l.mem, 10)
		if v2 {
			if err := w("memory.max", m); err != nil {
				return err
			}
			// No swap beyond the limit: a box over it is killed, not
			// paged out at the host's expense.
			if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
				return w("memory.swap.max", "0")
			}
			return nil
		}
		if err := w("memory.limit_in_bytes", m); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			return w("memory.memsw.limit_in_bytes", m) // memory and swap together
		}
		return nil
	case "cpu":
		if l.cpus <= 0 {
			return errors.New("no CPU limit asked")
		}
		quota := max(int64(l.cpus*cpuPeriod), 1000)
		if v2 {
			return w("cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod))
		}
		if err := w("cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		return w("cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	return nil
}

// sweep removes box cgroups whose deputy process is gone. A cgroup still
// holding processes refuses removal, which is what is wanted.
func sweep(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		pidStr, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if !alive(pid) {
			_ = os.Remove(filepath.Join(base, e.Name()))
		}
	}
}

// add moves the process pid (with its threads) into the box's cgroups.
func (c *cgroup) add(pid int) error {
	for _, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// tasks is how many tasks are in the cgroup now.
func (c *cgroup) tasks() int {
	b, err := os.ReadFile(filepath.Join(c.pids, "pids.current"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// refused is how many forks the limit has refused so far.
func (c *cgroup) refused() int64 {
	if !c.hasPids() {
		return 0
	}
	return counter(filepath.Join(c.pids, "pids.events"), "max")
}

// oomKills is how many processes the memory limit has killed so far.
func (c *cgroup) oomKills() int64 {
	if !c.hasMemory() {
		return 0
	}
	if c.v2["memory"] {
		return counter(filepath.Join(c.mem, "memory.events"), "oom_kill")
	}
	return counter(filepath.Join(c.mem, "memory.oom_control"), "oom_kill")
}

// throttled is how many CPU periods the box was held back at its quota.
func (c *cgroup) throttled() int64 {
	if !c.hasCPU() {
		return 0
	}
	return counter(filepath.Join(c.cpu, "cpu.stat"), "nr_throttled")
}

// counter reads the value of "name N" in a cgroup's flat keyed file.
func counter(file, name string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes the cgroups. Their processes are dead by then, but the
// kernel may take a moment to detach the last of them, so an EBUSY is
// retried for a bounded time.
func (c *cgroup) remove() error {
	var errs []error
	for _, dir := range c.dirs {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", dir, err))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}
