// Package cgroup gives one sandbox box its own cgroups and reads them back:
// it finds where each controller the box uses (pids, memory, cpu) is
// mounted and where this process sits in it (cgroup v1, v2, or a hybrid
// of both; inside a cgroup namespace or not), makes the box's directory
// there with the limits written, moves processes in, reads the counters
// that tell a command it hit a limit, and removes the directories. It
// knows nothing of bubblewrap or of what runs in the box: the sandbox
// decides what to do where a controller is missing (a watchdog, rlimits).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Controllers are the ones a box uses, as cgroup v1 mount options and v2
// controller names spell them.
var Controllers = []string{"pids", "memory", "cpu"}

// CPUPeriod is the CFS bandwidth period of a box's CPU quota, in
// microseconds: the kernel's default, short enough that a throttled box
// still answers promptly.
const CPUPeriod = 100_000

// Limits are what a box's cgroups enforce: the process count, the memory
// of all its processes together, in bytes, and its CPU bandwidth, in CPUs.
type Limits struct {
	Tasks  int
	Memory int64
	CPUs   float64
}

// Group is one box's cgroups: a directory in each hierarchy holding a
// controller it uses (cgroup v1 mounts each controller on its own, or a
// few together; v2 has one hierarchy), into all of which every command's
// sandbox is moved. pids.max is its process-count limit, the memory
// controller's limit its memory, the CPU controller's quota its share of
// the CPUs: for the box as a whole, whatever its processes do. A nil
// *Group is no cgroup at all, and says so.
type Group struct {
	dirs []string // the box's directory in each hierarchy
	pids string   // the directory with pids.*, or ""
	mem  string   // with memory.*, or ""
	cpu  string   // with cpu.*, or ""
	v2   map[string]bool
}

// Dir is the box's directory holding controller c's files, "" when c
// does not limit the box. It is nil-safe.
func (g *Group) Dir(c string) string {
	if g == nil {
		return ""
	}
	switch c {
	case "pids":
		return g.pids
	case "memory":
		return g.mem
	case "cpu":
		return g.cpu
	}
	return ""
}

// V2 reports whether controller c is on the cgroup v2 hierarchy (its
// files are spelled the v2 way). It is nil-safe.
func (g *Group) V2(c string) bool { return g != nil && g.v2[c] }

// HasPids reports whether the pids controller limits the box (else the
// sandbox must count processes itself). It is nil-safe.
func (g *Group) HasPids() bool { return g.Dir("pids") != "" }

// HasMemory reports whether the memory controller limits the box (else
// the sandbox must limit each process). It is nil-safe.
func (g *Group) HasMemory() bool { return g.Dir("memory") != "" }

// HasCPU reports whether the CPU controller limits the box. It is
// nil-safe.
func (g *Group) HasCPU() bool { return g.Dir("cpu") != "" }

// Add moves the process pid (with its threads) into the box's cgroups.
func (g *Group) Add(pid int) error {
	for _, dir := range g.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// Tasks is how many tasks are in the box's cgroups now.
func (g *Group) Tasks() int {
	b, err := os.ReadFile(filepath.Join(g.pids, "pids.current"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// Refused is how many forks the process limit has refused so far.
func (g *Group) Refused() int64 {
	if !g.HasPids() {
		return 0
	}
	return counter(filepath.Join(g.pids, "pids.events"), "max")
}

// OOMKills is how many processes the memory limit has killed so far.
func (g *Group) OOMKills() int64 {
	if !g.HasMemory() {
		return 0
	}
	if g.v2["memory"] {
		return counter(filepath.Join(g.mem, "memory.events"), "oom_kill")
	}
	return counter(filepath.Join(g.mem, "memory.oom_control"), "oom_kill")
}

// Throttled is how many CPU periods the box was held back at its quota.
func (g *Group) Throttled() int64 {
	if !g.HasCPU() {
		return 0
	}
	return counter(filepath.Join(g.cpu, "cpu.stat"), "nr_throttled")
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

// Remove deletes the cgroups. Their processes are dead by then, but the
// kernel may take a moment to detach the last of them, so an EBUSY is
// retried for a bounded time.
func (g *Group) Remove() error {
	var errs []error
	for _, dir := range g.dirs {
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
