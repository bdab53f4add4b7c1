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

// cgroup is one Box's cgroup in the pids hierarchy: pids.max is its
// process-count limit and every command's sandbox is moved into it.
type cgroup struct {
	dir string
	v2  bool
}

// cgroupParent is the directory under deputy's own cgroup that holds the
// boxes' cgroups.
const cgroupParent = "deputy-sandbox"

var cgroupSeq atomic.Int64

// cgroupFix is the advice when no pids cgroup can be made.
const cgroupFix = "run deputy as root, or in a cgroup whose pids controller is delegated to it " +
	"(cgroup v2: systemd Delegate=yes, or `echo +pids` into its parent's cgroup.subtree_control); " +
	"meanwhile a watchdog enforces the process limit"

// cgroupBase finds the pids hierarchy and deputy's place in it: the
// directory under which box cgroups are made (created if needed, with the
// pids controller enabled for its children on v2). cgroup v1's pids
// hierarchy is preferred where both exist (hybrid hosts keep controllers
// there).
func cgroupBase() (string, bool, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, fmt.Errorf("cgroups: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("cgroups: %w", err)
	}
	var v1Path, v2Path string
	haveV2 := false
	for _, line := range strings.Split(string(own), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2Path, haveV2 = f[2], true
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "pids" {
				v1Path = f[2]
			}
		}
	}
	var v1Mnt, v1Root, v2Mnt, v2Root string
	for _, line := range strings.Split(string(mounts), "\n") {
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
				if o == "pids" {
					v1Mnt, v1Root = pf[4], pf[3]
				}
			}
		case "cgroup2":
			if v2Mnt == "" {
				v2Mnt, v2Root = pf[4], pf[3]
			}
		}
	}
	if v1Path != "" && v1Mnt != "" {
		base := filepath.Join(v1Mnt, relTo(v1Path, v1Root), cgroupParent)
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", false, fmt.Errorf("cgroup v1 pids: %w", err)
		}
		return base, false, nil
	}
	if !haveV2 || v2Mnt == "" {
		return "", false, errors.New("no pids cgroup controller is mounted")
	}
	own2 := filepath.Join(v2Mnt, relTo(v2Path, v2Root))
	ctl, err := os.ReadFile(filepath.Join(own2, "cgroup.controllers"))
	if err != nil || !hasWord(string(ctl), "pids") {
		return "", false, fmt.Errorf("cgroup v2: the pids controller is not available in %s", own2)
	}
	if err := enable(own2, "pids"); err != nil {
		return "", false, fmt.Errorf("cgroup v2: enable pids for %s's children: %w", own2, err)
	}
	base := filepath.Join(own2, cgroupParent)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", false, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := enable(base, "pids"); err != nil {
		return "", false, fmt.Errorf("cgroup v2: %w", err)
	}
	if hasWord(string(ctl), "memory") {
		if enable(own2, "memory") == nil {
			_ = enable(base, "memory") // best effort: only memory.max depends on it
		}
	}
	return base, true, nil
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

// newCgroup makes a box's cgroup with its limits. It also removes the
// empty cgroups left by deputy processes that died without closing their
// boxes.
func newCgroup(maxTasks int, memBytes int64) (*cgroup, error) {
	base, v2, err := cgroupBase()
	if err != nil {
		return nil, err
	}
	sweep(base)
	dir := filepath.Join(base, fmt.Sprintf("%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	cg := &cgroup{dir: dir, v2: v2}
	if err := cg.write("pids.max", strconv.Itoa(maxTasks)); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	if v2 && memBytes > 0 {
		if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
			if err := cg.write("memory.max", strconv.FormatInt(memBytes, 10)); err != nil {
				_ = os.Remove(dir)
				return nil, err
			}
		}
	}
	return cg, nil
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

func (c *cgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// add moves the process pid (with its threads) into the cgroup.
func (c *cgroup) add(pid int) error {
	return c.write("cgroup.procs", strconv.Itoa(pid))
}

// tasks is how many tasks are in the cgroup now.
func (c *cgroup) tasks() int {
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.current"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// refused is how many forks the limit has refused so far.
func (c *cgroup) refused() int64 {
	f, err := os.Open(filepath.Join(c.dir, "pids.events"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "max "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes the cgroup. Its processes are dead by then, but the
// kernel may take a moment to detach the last of them, so an EBUSY is
// retried for a bounded time.
func (c *cgroup) remove() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: remove %s: %w", c.dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
