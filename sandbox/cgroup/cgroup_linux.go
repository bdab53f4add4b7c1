//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// parentDir is the directory under deputy's own cgroup that holds the
// boxes' cgroups.
const parentDir = "deputy-sandbox"

// seq numbers this process's boxes: a box's cgroup is named PID-SEQ,
// unique, and naming its owner for sweep.
var seq atomic.Int64

// New makes a box's cgroups with their limits, one per hierarchy
// holding a controller it can use. It returns nil when none could be made,
// and why each missing controller is missing. It also removes the empty
// cgroups left by deputy processes that died without closing their boxes.
func New(l Limits) (*Group, map[string]error) {
	bases, v2, why, err := findBases()
	if err != nil {
		why = map[string]error{}
		for _, c := range Controllers {
			why[c] = err
		}
		return nil, why
	}
	cg := &Group{v2: v2}
	made := map[string]string{} // base → the box's dir there
	name := fmt.Sprintf("%d-%d", os.Getpid(), seq.Add(1))
	for _, c := range Controllers {
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
		if err := limit(c, dir, v2[c], l); err != nil {
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
		_ = cg.Remove()
		return nil, why
	}
	return cg, why
}

// limit writes controller c's limit in dir.
func limit(c, dir string, v2 bool, l Limits) error {
	w := func(file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		return nil
	}
	switch c {
	case "pids":
		return w("pids.max", strconv.Itoa(l.Tasks))
	case "memory":
		if l.Memory <= 0 {
			return errors.New("no memory limit asked")
		}
		m := strconv.FormatInt(l.Memory, 10)
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
		if l.CPUs <= 0 {
			return errors.New("no CPU limit asked")
		}
		quota := max(int64(l.CPUs*CPUPeriod), 1000)
		if v2 {
			return w("cpu.max", fmt.Sprintf("%d %d", quota, CPUPeriod))
		}
		if err := w("cpu.cfs_period_us", strconv.Itoa(CPUPeriod)); err != nil {
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

// alive reports whether a process with this pid exists (EPERM: it exists,
// and is someone else's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// findBases finds where each controller's hierarchy is and deputy's
// place in it: the directory under which box cgroups are made (created if
// needed, with the controllers enabled for its children on v2). cgroup
// v1 is preferred where a controller is on both (hybrid hosts keep them
// there). A controller found nowhere has an error saying why.
func findBases() (map[string]string, map[string]bool, map[string]error, error) {
	pl, err := findPlaces()
	if err != nil {
		return nil, nil, nil, err
	}
	bases, v2, why := map[string]string{}, map[string]bool{}, map[string]error{}
	for _, c := range Controllers {
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

// mount is a cgroup hierarchy's mount: its directory, and the cgroup it
// shows there (not "/" inside a cgroup namespace).
type mount struct{ dir, root string }

// places is where this process is in the cgroup hierarchies, as
// /proc/self/cgroup and /proc/self/mountinfo tell it.
type places struct {
	v1Path map[string]string // this process's v1 cgroup, by controller
	v1     map[string]mount  // the v1 hierarchies, by mount option
	own2   string            // its v2 cgroup's directory, "" without v2
	avail2 string            // that cgroup's cgroup.controllers
}

// findPlaces reads where this process is in each cgroup hierarchy and
// where those are mounted.
func findPlaces() (places, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return places{}, fmt.Errorf("cgroups: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return places{}, fmt.Errorf("cgroups: %w", err)
	}
	var pl places
	var v2Path string
	var haveV2 bool
	pl.v1Path, v2Path, haveV2 = parseOwnCgroups(string(own))
	var v2 mount
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
func parseCgroupMounts(s string) (v1 map[string]mount, v2 mount) {
	v1 = map[string]mount{}
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
				v1[o] = mount{dir: pf[4], root: pf[3]}
			}
		case "cgroup2":
			if v2.dir == "" {
				v2 = mount{dir: pf[4], root: pf[3]}
			}
		}
	}
	return v1, v2
}

// base makes controller c's base directory: on v1 where c is mounted
// there (hybrid hosts keep their controllers there), else on v2.
func (pl places) base(c string) (dir string, isV2 bool, err error) {
	if p, ok := pl.v1Path[c]; ok && pl.v1[c].dir != "" {
		base := filepath.Join(pl.v1[c].dir, relTo(p, pl.v1[c].root), parentDir)
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
func (pl places) v2Base(c string) (string, error) {
	if pl.own2 == "" {
		return "", fmt.Errorf("no %s cgroup controller is mounted", c)
	}
	if !hasWord(pl.avail2, c) {
		return "", fmt.Errorf("cgroup v2: the %s controller is not available in %s", c, pl.own2)
	}
	base := filepath.Join(pl.own2, parentDir)
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

// hasWord reports whether w is one of the words of s, a cgroup file
// listing controllers.
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
