package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// DefaultMaxProcesses is the process-count limit when a Policy gives none:
// enough for a parallel build (the kernel counts threads as tasks, and a Go
// compile has a dozen), small enough that a fork bomb stops there.
const DefaultMaxProcesses = 1024

// DefaultCPUSeconds is the CPU-time limit of each process when a Policy
// gives none: an hour, more than a command can use in the bash tool's
// longest timeout (10 minutes) on most machines, so it only stops a
// runaway whose command has no such timeout (a container's hard timeout
// may be hours).
const DefaultCPUSeconds = 3600

// DefaultMemoryBytes is the memory limit of a box when a Policy gives
// none: 2 GiB, enough for a Go or C++ build or a test suite, or half the
// host's memory if that is less, so one box cannot take the host down.
func DefaultMemoryBytes() int64 {
	const def = 2 << 30
	if total := hostMemory(); total > 0 && total/2 < def {
		return total / 2
	}
	return def
}

// DefaultCPUs is the CPU bandwidth of a box when a Policy gives none:
// half the CPUs deputy may use, at least one, so a busy box leaves the
// host (deputy itself, the other boxes, the user) room to run.
func DefaultCPUs() float64 {
	return max(1, float64(runtime.NumCPU())/2)
}

// hostMemory is MemTotal from /proc/meminfo, in bytes (0 if unknown).
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// Policy is what a Box allows. Zero fields take defaults.
type Policy struct {
	// Workspace is the directory the programs may read and write
	// (required). Relative paths are made absolute; symlinks are resolved,
	// and the sandbox sees it at its resolved path (see Box.Dir).
	Workspace string
	// WritePaths and ReadPaths are more files or directories the programs
	// may write, or only read (a module cache, a toolchain outside the
	// system directories). They must exist.
	WritePaths []string
	ReadPaths  []string
	// Protect are paths relative to the workspace (a file or a whole
	// directory) the programs may read but never change, even though they
	// lie in the writable workspace: a repository's .git (hooks and
	// config would run the child's code outside the sandbox, at the
	// user's next git command) and deputy's own files. That holds whether
	// or not they exist: for one that does not, the box makes an empty
	// placeholder (a directory when the entry ends in "/", else a file)
	// and mounts it read-only, and removes it on Close if it is still its
	// own and empty. A protected path that is a symlink is refused. A
	// snapshot's Commit never applies changes under them.
	Protect []string
	// Hide are paths relative to the workspace the programs can neither
	// read nor change: an empty read-only directory (or file) stands in
	// for each, made as for Protect when it does not exist. deputy's
	// .deputy directory is one: it holds the database of every run's
	// transcripts. A snapshot neither copies nor commits them.
	Hide []string
	// Env names more variables of the caller's environment that reach
	// the programs, beyond the few every box passes (PATH, HOME, TMPDIR,
	// the locale, TERM, TZ, SHELL, USER): the rest, secrets included,
	// never does.
	Env []string
	// Network shares the host's network. Without it the sandbox has its own
	// network namespace with only a loopback nobody else can reach.
	Network bool

	// CPUSeconds is RLIMIT_CPU: each process is killed after that much CPU
	// time; 0 means DefaultCPUSeconds.
	CPUSeconds int
	// MemoryBytes bounds the memory of the whole box, all its commands'
	// processes together (page cache they dirty included): the memory
	// cgroup's limit (memory.max on v2, memory.limit_in_bytes and, with
	// swap accounting, memory.memsw.limit_in_bytes on v1), over which the
	// kernel kills the box's largest process and the command's note says
	// so. Where no memory cgroup can be made, it is each process's
	// RLIMIT_DATA instead (the memory it may write, not what it reserves,
	// so runtimes that reserve large ranges up front still start). 0 means
	// DefaultMemoryBytes().
	MemoryBytes int64
	// CPUs bounds the CPU time of the whole box per unit of wall time, in
	// CPUs (1.5: one and a half cores' worth): the CPU cgroup's bandwidth
	// quota (cpu.max on v2, cpu.cfs_quota_us on v1). A box at its quota
	// is slowed, not killed. Where no CPU cgroup can be made there is no
	// such bound (CPUSeconds still holds). 0 means DefaultCPUs().
	CPUs float64
	// MaxProcesses bounds the tasks (processes and threads, as the kernel's
	// pids controller counts them) alive at once in the box, across its
	// commands; 0 means DefaultMaxProcesses. There is no unlimited: a fork
	// bomb must stop somewhere.
	MaxProcesses int

	// RootFS is the container level: a directory holding a root file
	// system (made with debootstrap, or busybox and a few symlinks) that
	// the programs see as / instead of the host's system directories. The
	// roots are mounted into it at their host paths.
	RootFS string
	// Snapshot gives the programs a copy of the workspace instead of the
	// workspace itself. Box.Commit applies the copy's changes to the
	// workspace; Box.Discard (or Close without Commit) drops them.
	Snapshot bool
	// StateDir is where the box keeps its snapshot and the directory the
	// programs see as /tmp (os.TempDir()); it must not lie in the
	// workspace. A file system with reflinks (btrfs, XFS) makes the
	// snapshot's copy cheap.
	StateDir string
	// HardTimeout, when positive, kills everything running in the box
	// once that much time has passed on Clock since New, and refuses any
	// later command.
	HardTimeout time.Duration
	// Clock times HardTimeout and the watchdog (clock.Real).
	Clock clock.Clock
	// Bwrap is the bubblewrap binary ("bwrap", looked up on PATH).
	Bwrap string

	// forceWatchdog skips the cgroup (tests of the watchdog).
	forceWatchdog bool
	// guards are Protect and Hide, parsed (normalize).
	guards []guard
}

// watchdogEvery is how often the watchdog counts tasks.
const watchdogEvery = 20 * time.Millisecond

// root is a host path the sandbox sees, at the same path.
type root struct {
	path     string // absolute, symlinks resolved
	writable bool
}

// normalize checks p and fills in defaults. The returned roots are the
// workspace's (first) and the granted paths, resolved.
func (p Policy) normalize() (Policy, []root, error) {
	if p.Workspace == "" {
		return p, nil, errors.New("sandbox: no workspace given")
	}
	ws, err := resolveRoot(p.Workspace, "workspace")
	if err != nil {
		return p, nil, err
	}
	if fi, err := os.Stat(ws); err != nil {
		return p, nil, fmt.Errorf("sandbox: workspace %s: %w", p.Workspace, err)
	} else if !fi.IsDir() {
		return p, nil, fmt.Errorf("sandbox: workspace %s is not a directory", p.Workspace)
	}
	p.Workspace = ws
	roots := []root{{path: ws, writable: true}}
	for _, list := range []struct {
		paths    []string
		what     string
		writable bool
	}{{p.WritePaths, "write path", true}, {p.ReadPaths, "read path", false}} {
		for _, w := range list.paths {
			r, err := resolveRoot(w, list.what)
			if err != nil {
				return p, nil, err
			}
			roots = append(roots, root{path: r, writable: list.writable})
		}
	}
	if p.RootFS != "" {
		rfs, err := resolveRoot(p.RootFS, "root filesystem")
		if err != nil {
			return p, nil, err
		}
		if fi, err := os.Stat(rfs); err != nil || !fi.IsDir() {
			return p, nil, fmt.Errorf("sandbox: root filesystem %s is not a directory", p.RootFS)
		}
		for _, r := range roots {
			if within(r.path, rfs) {
				return p, nil, fmt.Errorf("sandbox: %s lies inside the root filesystem %s; give a path outside it", r.path, rfs)
			}
		}
		p.RootFS = rfs
	}
	if p.StateDir == "" {
		p.StateDir = os.TempDir()
	}
	if p.StateDir, err = resolveRoot(p.StateDir, "state directory"); err != nil {
		return p, nil, err
	}
	if within(p.StateDir, ws) {
		return p, nil, fmt.Errorf("sandbox: the state directory %s lies in the workspace %s; set Policy.StateDir elsewhere", p.StateDir, ws)
	}
	if p.guards, err = parseGuards(p.Protect, p.Hide); err != nil {
		return p, nil, err
	}
	if p.CPUSeconds < 0 || p.MemoryBytes < 0 || p.MaxProcesses < 0 || p.HardTimeout < 0 || p.CPUs < 0 {
		return p, nil, errors.New("sandbox: negative limit")
	}
	// There is no unlimited: a child's programs are the model's, and one
	// that allocates or spins without bound must stop at something.
	if p.MaxProcesses == 0 {
		p.MaxProcesses = DefaultMaxProcesses
	}
	if p.CPUSeconds == 0 {
		p.CPUSeconds = DefaultCPUSeconds
	}
	if p.MemoryBytes == 0 {
		p.MemoryBytes = DefaultMemoryBytes()
	}
	if p.CPUs == 0 {
		p.CPUs = DefaultCPUs()
	}
	if p.Clock == nil {
		p.Clock = clock.Real
	}
	if p.Bwrap == "" {
		p.Bwrap = "bwrap"
	}
	return p, roots, nil
}

// resolveRoot makes a configured path absolute and resolves its symlinks,
// so the path mounted is the one the kernel would reach, and refuses "/",
// which would hand the whole host to the sandbox.
func resolveRoot(p, what string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("sandbox: %s %q contains a NUL byte", what, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s %s: %w", what, p, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s %s: %w", what, p, err)
	}
	if real == "/" {
		return "", fmt.Errorf("sandbox: %s %s is the host's root directory; give a directory below it", what, p)
	}
	return real, nil
}

// within reports whether path is dir or lies below it (both clean and
// absolute).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/") || dir == "/"
}
