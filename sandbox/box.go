package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/sandbox/cgroup"
)

// killWait bounds, in real time, how long ending a command waits for the
// kernel to tear its PID namespace down; it takes milliseconds.
const killWait = 10 * time.Second

// ErrClosed is returned (wrapped, with the reason) for a command started
// in a closed box, one whose snapshot was discarded, or one whose hard
// timeout has passed.
var ErrClosed = errors.New("sandbox: the box is closed")

// Box is one child session's sandbox. Commands started through it (Start,
// Command) run confined by its Policy. It owns the session's resources:
// the cgroup, the snapshot and the hard-timeout timer; Close releases them.
// A Box is safe for concurrent use.
type Box struct {
	p      Policy
	roots  []root   // what the sandbox sees, the snapshot in place of the workspace
	prefix []string // bwrap and the options every command shares
	dir    string
	tmp    string           // the host directory mounted as /tmp
	cg     *cgroup.Group    // nil, or without pids: the watchdog counts processes
	cgErr  map[string]error // why a controller is missing from cg
	snap   *snapshot
	// placeholders are the protected paths the box binds: those it made
	// (or took over from another box) for paths that did not exist, which
	// Close removes once no sandbox is alive and no other live box binds
	// them, and those it found (guard.go). guardMu orders the checks
	// before commands and Close.
	guardMu      sync.Mutex
	placeholders []placeholder
	// masks are the host paths prefix masks (systemMasks), as they stood
	// at New. A mask over a path removed since makes bwrap fail: it cannot
	// make the mount point in the read-only system. So regard rebuilds
	// prefix when one has gone; guardMu guards both.
	masks       []string
	guardRecord string // the state directory recording them, for other boxes and Sweep

	mu       sync.Mutex
	runs     map[*run]struct{}
	closed   error // non-nil once nothing more may start, saying why
	released bool  // Close has run
	hard     clock.Timer
	watchdog clock.Timer // armed while commands run without a cgroup
}

// New makes a box for one child session. It fails, saying how to fix it,
// when bubblewrap is missing or cannot make a sandbox here; it never falls
// back to running unconfined. With Snapshot, it copies the workspace.
func New(p Policy) (*Box, error) {
	if !supported {
		return nil, fmt.Errorf("sandbox: %w", errUnsupported)
	}
	p, roots, err := p.normalize()
	if err != nil {
		return nil, err
	}
	bwrap, err := available(p.Bwrap)
	if err != nil {
		return nil, err
	}
	b := &Box{p: p, roots: roots, dir: p.Workspace, runs: map[*run]struct{}{}}
	// One /tmp for all the session's commands, as a shell session would
	// have it (a script written there in one call runs in the next; the
	// Go build cache under HOME=/tmp persists), and on disk, not in RAM.
	if b.tmp, err = os.MkdirTemp(p.StateDir, statePrefix("tmp")); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if p.Snapshot {
		if b.snap, err = takeSnapshot(p.Workspace, p.StateDir, p.guards); err != nil {
			_ = removeTree(b.tmp)
			return nil, err
		}
		b.roots[0].path = b.snap.copy
		b.dir = b.snap.copy
	}
	if err = b.guard(); err != nil {
		_ = b.dropSnapshot()
		_ = removeTree(b.tmp)
		return nil, err
	}
	var mounts []string
	if err == nil {
		mounts, err = mountArgs(p, b.roots, b.tmp)
	}
	if err != nil {
		b.dropPlaceholders()
		_ = b.dropSnapshot()
		_ = removeTree(b.tmp)
		return nil, err
	}
	b.prefix = append(append([]string{bwrap}, namespaceArgs(p.Network)...), mounts...)
	if p.RootFS == "" { // a root filesystem's masks are not the host's paths
		b.masks = maskTargets(mounts)
	}
	if p.forceWatchdog {
		b.cgErr = map[string]error{}
		for _, c := range cgroup.Controllers {
			b.cgErr[c] = errors.New("cgroup skipped")
		}
	} else {
		b.cg, b.cgErr = cgroup.New(cgroup.Limits{Tasks: p.MaxProcesses, Memory: p.MemoryBytes, CPUs: p.CPUs})
	}
	if p.HardTimeout > 0 {
		b.hard = p.Clock.AfterFunc(p.HardTimeout, func() {
			b.stop(fmt.Errorf("%w: its hard timeout (%s) has passed", ErrClosed, p.HardTimeout),
				"killed at the hard timeout ("+p.HardTimeout.String()+")")
		})
	}
	return b, nil
}

// Dir is the workspace as the sandboxed programs see it, symlinks
// resolved: with Snapshot, the copy. Every tool of the child session (file
// tools included) must work in Dir, so that what it writes is what Commit
// applies.
func (b *Box) Dir() string { return b.dir }

// Description tells the model what the sandbox allows, in a few
// sentences, so it expects a read-only system or no network instead of
// discovering them by failing. Put it in the child's instructions, not in
// a tool's description: a forked child's tools must stay byte-identical to
// its parent's for the prompt cache to hit.
func (b *Box) Description() string {
	var d strings.Builder
	d.WriteString("Commands run in a sandbox as an unprivileged user. They can write only in " + b.dir)
	for _, r := range b.roots[1:] {
		if r.writable {
			d.WriteString(", " + r.path)
		}
	}
	if b.p.RootFS != "" {
		d.WriteString("; the rest is a separate, read-only root filesystem")
	} else {
		d.WriteString("; the system directories are read-only and other host paths (home directories) do not exist")
	}
	d.WriteString(". /tmp is private to this session. ")
	if b.p.Network {
		d.WriteString("The network is available. ")
	} else {
		d.WriteString("There is no network (only a private loopback). ")
	}
	fmt.Fprintf(&d, "At most %d processes and threads at once", b.p.MaxProcesses)
	if b.cg.HasMemory() {
		fmt.Fprintf(&d, "; %d MiB of memory for all of them together (over it the largest is killed)", b.p.MemoryBytes>>20)
	} else {
		fmt.Fprintf(&d, "; %d MiB of memory per process", b.p.MemoryBytes>>20)
	}
	if b.cg.HasCPU() {
		fmt.Fprintf(&d, "; %s CPUs' worth of time", strconv.FormatFloat(b.p.CPUs, 'g', 3, 64))
	}
	fmt.Fprintf(&d, "; %d s of CPU time per process.", b.p.CPUSeconds)
	return d.String()
}

// Limits says how each limit is enforced: "processes: cgroup DIR" or
// "processes: watchdog (why no cgroup could be made)", then memory
// (cgroup, or RLIMIT_DATA per process) and CPU (cgroup, or none beyond
// RLIMIT_CPU), separated by "; ".
func (b *Box) Limits() string {
	var out []string
	say := func(what, c, fallback string) {
		if dir := b.cg.Dir(c); dir != "" {
			out = append(out, what+": cgroup "+dir)
		} else {
			out = append(out, fmt.Sprintf("%s: %s (%v)", what, fallback, b.cgErr[c]))
		}
	}
	say("processes", "pids", "watchdog")
	say("memory", "memory", "RLIMIT_DATA per process")
	say("cpu", "cpu", "RLIMIT_CPU only")
	return strings.Join(out, "; ")
}

// Start starts cmd in the sandbox, in place of cmd.Start. cmd's Args, Dir
// (the workspace when empty; it must lie inside the roots), Env (the
// process's when nil; HOME and TMPDIR outside the roots become /tmp),
// Stdin, Stdout, Stderr, ExtraFiles and SysProcAttr apply to the sandboxed
// program; Start rewrites cmd to run bwrap, which is the process cmd
// starts. Start implements shell.Sandbox.
//
// Once the process has exited, the caller must call end (before or after
// reaping it): end kills whatever the command left running in the
// sandbox, returns when all of it is gone, and says why the sandbox
// stopped or hindered the command ("" if it did not). On error nothing was
// left running and the process, if it started, has been reaped.
func (b *Box) Start(cmd *exec.Cmd) (end func() string, err error) {
	if len(cmd.Args) == 0 {
		return nil, errors.New("sandbox: no program to run")
	}
	if err := b.closedErr(); err != nil {
		return nil, err
	}
	dir, err := b.workdir(cmd.Dir)
	if err != nil {
		return nil, err
	}
	prefix, err := b.regard()
	if err != nil {
		return nil, err
	}
	infoR, blockW, err := b.launch(cmd, prefix, dir)
	if err != nil {
		return nil, err
	}
	// Closed only on return: on every failure below, after bwrap was
	// killed, so the blocked init never goes on.
	defer blockW.Close()
	s := &starting{b: b, cmd: cmd, prefix: prefix, dir: dir}
	r, err := s.attach(infoR)
	if err != nil {
		return nil, err
	}
	if err := b.confine(r); err != nil {
		return nil, s.fail(r, err)
	}
	if err := b.register(r); err != nil {
		return nil, s.fail(r, err)
	}
	if err := s.release(r, blockW); err != nil {
		return nil, err
	}
	return r.end, nil
}

// closedErr is why the box refuses commands, nil while it takes them.
func (b *Box) closedErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// argv is the program and its arguments as the sandbox runs them. In a
// root filesystem the program is looked up there, by the name it was
// given; on the host, the path exec already found is exact.
func (b *Box) argv(cmd *exec.Cmd) []string {
	argv := append([]string(nil), cmd.Args...)
	if b.p.RootFS == "" && cmd.Err == nil && filepath.IsAbs(cmd.Path) {
		argv[0] = cmd.Path
	}
	return argv
}

// launch rewrites cmd to run the program under bwrap (prefix) in dir, and
// starts bwrap with two pipes after cmd's ExtraFiles: the info fd, on
// which bwrap reports its init's pid, and the block fd, on which that init
// waits before it forks the program, so Start can confine it first. It
// returns the ends Start keeps; on error nothing started and nothing is
// left open.
func (b *Box) launch(cmd *exec.Cmd, prefix []string, dir string) (infoR, blockW *os.File, err error) {
	argv := b.argv(cmd)
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	nExtra := len(cmd.ExtraFiles)
	args := append([]string(nil), prefix...)
	args = append(args, "--chdir", dir,
		"--info-fd", fmt.Sprint(3+nExtra), "--block-fd", fmt.Sprint(4+nExtra), "--")
	cmd.Path = prefix[0]
	cmd.Args = append(args, argv...)
	cmd.Err = nil
	cmd.Dir = "/"
	cmd.Env = b.env(env)
	cmd.ExtraFiles = append(cmd.ExtraFiles, infoW, blockR)
	err = cmd.Start()
	cmd.ExtraFiles = cmd.ExtraFiles[:nExtra]
	infoW.Close()
	blockR.Close()
	if err != nil {
		infoR.Close()
		blockW.Close()
		return nil, nil, fmt.Errorf("sandbox: start bwrap: %w", err)
	}
	return infoR, blockW, nil
}

// starting is a command between bwrap's start and its init's release:
// what undoing it, when a step fails, needs.
type starting struct {
	b      *Box
	cmd    *exec.Cmd // bwrap, started
	prefix []string
	dir    string
}

// setupFailed ends a command whose sandbox bwrap could not make and
// says why. That is the caller's error, not the command's exit: bwrap
// would exit 1 with its message on the command's stderr, and the model
// would take that for its command failing when the command never ran.
func (s *starting) setupFailed() error {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	return s.b.setupError(s.prefix, s.dir)
}

// abort ends a command for a failure of the host's, not bwrap's, and
// returns that failure.
func (s *starting) abort(err error) error {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	return fmt.Errorf("sandbox: %w", err)
}

// fail ends a command whose init was attached but a step before its
// release failed. An init that exited before it was released died making
// the sandbox: setLimits or the cgroup then fail for want of it, and the
// error to report is bwrap's.
func (s *starting) fail(r *run, err error) error {
	gone := r.fd.exited()
	r.end()
	if gone {
		return s.setupFailed()
	}
	return s.abort(err)
}

// attach reads the pid of the sandbox's init from infoR (closing it) and
// holds pidfds of that init and of bwrap, so neither pid can be reused
// under the box. On error the command has been ended.
func (s *starting) attach(infoR *os.File) (*run, error) {
	pid, err := readChildPid(infoR)
	infoR.Close()
	if err != nil {
		// bwrap stopped before it cloned the sandbox's init: an option it
		// refused, namespaces it could not make.
		return nil, s.setupFailed()
	}

	// The sandbox's init waits on the block fd until released, so pid is
	// still its pid, and nothing has run in the sandbox yet, unless init
	// died making the sandbox (a mount that could not be made) and bwrap
	// reaped it: then the pid is free for reuse, and a process holding
	// it now is not bwrap's child.
	fd, err := openPidfd(pid)
	if err == nil && !childOf(fd, pid, s.cmd.Process.Pid) {
		fd.close()
		return nil, s.setupFailed()
	}
	if err != nil {
		// Killing bwrap kills its init (--die-with-parent) before the
		// deferred close of the block fd would let init go on.
		if errors.Is(err, errGone) {
			return nil, s.setupFailed()
		}
		return nil, s.abort(err)
	}
	// bwrap itself is our unreaped child: its pid is stable too.
	outer, err := openPidfd(s.cmd.Process.Pid)
	if err != nil {
		fd.kill()
		fd.wait(killWait)
		fd.close()
		return nil, s.abort(err)
	}
	return &run{b: s.b, pid: pid, fd: fd, outer: outer}, nil
}

// confine puts the held init under the box's limits, before it is
// released, so that nothing in the sandbox ever runs unconfined: the
// rlimits (memory per process only without a memory cgroup) and the
// cgroup, whose counters are noted first to tell this command's hits.
func (b *Box) confine(r *run) error {
	var data int64
	if !b.cg.HasMemory() {
		data = b.p.MemoryBytes
	}
	if err := setLimits(r.pid, b.p.CPUSeconds, data); err != nil {
		return err
	}
	if b.cg != nil {
		r.refused0, r.oom0 = b.cg.Refused(), b.cg.OOMKills()
		if err := b.cg.Add(r.pid); err != nil {
			return err
		}
	}
	return nil
}

// register adds r to the box's runs, which Kill, the hard timeout and
// Close kill, and arms the watchdog when no pids cgroup counts the
// processes; a box closed meanwhile refuses it with its reason.
func (b *Box) register(r *run) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return b.closed
	}
	b.runs[r] = struct{}{}
	if !b.cg.HasPids() && b.watchdog == nil {
		b.watchdog = b.p.Clock.AfterFunc(watchdogEvery, b.watch)
	}
	return nil
}

// release lets the sandbox's init go on and fork the command. init reads
// the byte only once the sandbox is made (every namespace and mount),
// right before it forks the command; if it dies first, the byte stays in
// the pipe (or, init gone already, cannot be written). Waiting for the
// one or the other costs a context switch, and tells a setup failure from
// the command's own. On error the command has been ended.
func (s *starting) release(r *run, blockW *os.File) error {
	_, err := blockW.Write([]byte{1})
	if errors.Is(err, syscall.EPIPE) || err == nil && !released(blockW, r.fd, killWait) {
		r.end()
		return s.setupFailed()
	}
	if err != nil {
		return s.fail(r, err)
	}
	return nil
}

// setupError is the error of a command whose sandbox bwrap could not
// make. bwrap said why on the command's stderr, which the box does not
// read (it is the caller's, shared with the command's output), so the box
// asks bwrap again, its stderr captured: the same sandbox, with a program
// that does not exist, so nothing runs either way. A second try that
// makes the sandbox says so.
func (b *Box) setupError(prefix []string, dir string) error {
	const probe = "/nonexistent/deputy-sandbox-setup-probe"
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	args := append(slices.Clone(prefix[1:]), "--chdir", dir, "--", probe)
	cmd := exec.CommandContext(ctx, prefix[0], args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stderr := &headWriter{max: 2048}
	cmd.Stderr = stderr
	_ = cmd.Run()
	msg := strings.TrimSpace(stderr.b.String())
	if msg == "" || strings.Contains(msg, probe) {
		msg = "bwrap exited before the command ran, and made the sandbox when tried again (its message is in the command's output)"
	}
	return fmt.Errorf("sandbox: bwrap could not make the sandbox, so nothing ran: %s", msg)
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   bytes.Buffer
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// workdir resolves the command's working directory and checks that the
// sandbox sees it.
func (b *Box) workdir(dir string) (string, error) {
	if dir == "" {
		return b.dir, nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: working directory: %w", err)
	}
	real, _ = filepath.Abs(real)
	for _, r := range b.roots {
		if within(real, r.path) {
			return real, nil
		}
	}
	return "", fmt.Errorf("sandbox: working directory %s is outside the sandbox's roots", dir)
}

// env adjusts the environment: HOME and TMPDIR naming directories the
// sandbox does not have (outside the roots; below /tmp, which is the
// box's own) become /tmp, so programs that write caches there work.
func (b *Box) env(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if !passEnv(name) && !slices.Contains(b.p.Env, name) {
			continue
		}
		if name == "HOME" || name == "TMPDIR" {
			if !b.visible(val) {
				continue
			}
		}
		out = append(out, kv)
	}
	home, tmp := false, false
	for _, kv := range out {
		home = home || strings.HasPrefix(kv, "HOME=")
		tmp = tmp || strings.HasPrefix(kv, "TMPDIR=")
	}
	if !home {
		out = append(out, "HOME=/tmp")
	}
	if !tmp {
		out = append(out, "TMPDIR=/tmp")
	}
	return out
}

func (b *Box) visible(p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	p = filepath.Clean(p)
	if p == "/tmp" {
		return true
	}
	for _, r := range b.roots {
		if within(p, r.path) {
			return true
		}
	}
	return false
}

// Kill kills everything running in the box now and returns once it is
// gone. The box stays usable.
func (b *Box) Kill() {
	b.killAll("killed by the session")
}

func (b *Box) killAll(reason string) {
	b.mu.Lock()
	runs := make([]*run, 0, len(b.runs))
	for r := range b.runs {
		runs = append(runs, r)
	}
	b.mu.Unlock()
	for _, r := range runs {
		r.kill(reason)
	}
}

// stop refuses further commands with err and kills the running ones.
func (b *Box) stop(err error, reason string) {
	b.mu.Lock()
	if b.closed == nil {
		b.closed = err
	}
	b.mu.Unlock()
	b.killAll(reason)
}

// Close kills everything still running, drops an uncommitted snapshot and
// removes the box's cgroup. Call it when the child session ends, however
// it ends; it is idempotent.
func (b *Box) Close() error {
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		return nil
	}
	b.released = true
	if b.closed == nil {
		b.closed = ErrClosed
	}
	if b.hard != nil {
		b.hard.Stop()
	}
	if b.watchdog != nil {
		b.watchdog.Stop()
		b.watchdog = nil
	}
	b.mu.Unlock()
	b.killAll("killed: the session ended")
	// Only now: every sandbox is gone, so no mount over them is lifted.
	b.dropPlaceholders()
	var errs []error
	if err := b.dropSnapshot(); err != nil {
		errs = append(errs, err)
	}
	if err := removeTree(b.tmp); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: remove the box's /tmp: %w", err))
	}
	if b.cg != nil {
		if err := b.cg.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// guard makes the placeholders of New and records what the box binds,
// under the state directory's lock (guard.go). A snapshot's are in its
// private copy: no lock, no record.
func (b *Box) guard() error {
	var err error
	if b.snap != nil {
		b.p.guards, b.placeholders, err = makePlaceholders(b.roots[0].path, b.p.guards, nil)
		return err
	}
	unlock, err := lockGuards(b.p.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	recs := readRecords(b.p.StateDir)
	if b.p.guards, b.placeholders, err = makePlaceholders(b.roots[0].path, b.p.guards, knownPlaceholder(recs)); err != nil {
		return err
	}
	if b.guardRecord, err = recordPlaceholders(b.p.StateDir, b.placeholders); err != nil {
		removePlaceholders(b.placeholders, inUse(recs, func(guardRecord) bool { return false }))
		return err
	}
	return nil
}

// regard, before a command, makes again the paths the box binds that were
// removed from under it, so bwrap finds every mount's source, rebuilds the
// mounts when a masked system path has gone, and returns the bwrap
// prefix the command is to use.
func (b *Box) regard() ([]string, error) {
	b.guardMu.Lock()
	defer b.guardMu.Unlock()
	if slices.ContainsFunc(b.masks, gone) {
		mounts, err := mountArgs(b.p, b.roots, b.tmp)
		if err != nil {
			return nil, err
		}
		b.prefix = append(append([]string{b.prefix[0]}, namespaceArgs(b.p.Network)...), mounts...)
		b.masks = maskTargets(mounts)
	}
	if !missingPlaceholder(b.placeholders) {
		return b.prefix, nil
	}
	if b.snap == nil {
		unlock, err := lockGuards(b.p.StateDir)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	ps, changed, err := remakePlaceholders(b.roots[0].path, b.placeholders)
	if changed {
		b.placeholders = ps
		if b.guardRecord != "" {
			if werr := rewriteRecord(b.guardRecord, ps); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return b.prefix, err
}

// dropPlaceholders removes the box's placeholders that no other live box
// binds, and its record.
func (b *Box) dropPlaceholders() {
	b.guardMu.Lock()
	defer b.guardMu.Unlock()
	if b.guardRecord == "" {
		removePlaceholders(b.placeholders, nil)
		return
	}
	unlock, err := lockGuards(b.p.StateDir)
	if err != nil {
		return // left in place: harmless, and Sweep takes them later
	}
	defer unlock()
	recs := readRecords(b.p.StateDir)
	removePlaceholders(b.placeholders, inUse(recs, func(r guardRecord) bool { return r.dir == b.guardRecord }))
	_ = os.RemoveAll(b.guardRecord)
}

// run is one started command: bwrap's init in the host's PID namespace.
type run struct {
	b        *Box
	pid      int
	refused0 int64 // the cgroup's refused forks when it started
	oom0     int64 // and its processes killed over the memory limit

	mu     sync.Mutex
	fd     pidfd // the sandbox's init
	outer  pidfd // bwrap, which exits once init has
	closed bool
	note   string // why the box killed it
}

// kill kills the command's sandbox and waits until it is gone, bwrap
// included (left unreaped for its owner's Wait).
func (r *run) kill(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.note == "" && !r.fd.exited() {
		r.note = reason
	}
	r.fd.kill()
	r.fd.wait(killWait)
	r.outer.wait(killWait)
}

// end is Start's end function.
func (r *run) end() string {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ""
	}
	r.fd.kill()
	gone := r.fd.wait(killWait)
	r.fd.close()
	r.outer.close()
	r.closed = true
	note := r.note
	r.mu.Unlock()

	b := r.b
	b.mu.Lock()
	delete(b.runs, r)
	b.mu.Unlock()
	if !gone {
		note = fmt.Sprintf("processes of the command were still exiting after %s", killWait)
	}
	if note == "" && b.cg != nil {
		// Counted for the box: a command running beside this one may
		// have been the one hit.
		if n := b.cg.OOMKills() - r.oom0; n > 0 {
			note = fmt.Sprintf("the memory limit (%d MiB for the sandbox) killed %d processes", b.p.MemoryBytes>>20, n)
		} else if n := b.cg.Refused() - r.refused0; n > 0 {
			note = fmt.Sprintf("the process limit (%d) refused %d forks", b.p.MaxProcesses, n)
		}
	}
	return note
}

// readChildPid reads the pid of the sandbox's init from bwrap's info fd:
// a JSON object, written right after the clone, whose last write is its
// closing brace. Reading stops there: bwrap writes nothing more, so
// closing the pipe cannot cost it a SIGPIPE, and no EOF is awaited (the
// blocked init still holds a copy of the write end).
func readChildPid(f *os.File) (int, error) {
	var buf []byte
	chunk := make([]byte, 512)
	for !strings.Contains(string(buf), "}") {
		if len(buf) > 8192 {
			return 0, errors.New("bwrap info: too long")
		}
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil && !strings.Contains(string(buf), "}") {
			return 0, fmt.Errorf("bwrap info: %w", err)
		}
	}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.Unmarshal(buf, &info); err != nil || info.ChildPid <= 0 {
		return 0, fmt.Errorf("bwrap info: no child-pid in %q", buf)
	}
	return info.ChildPid, nil
}

// passEnv reports whether a variable of the caller's environment reaches
// sandboxed programs: an allowlist, not a filter of secret-looking names,
// since a database URL with its password or a cloud key has no telltale
// name (DEPUTY_DB, DATABASE_URL, AWS_ACCESS_KEY_ID).
//
// It is narrower than the bash tool's (shell.AllowEnv, which runs first
// when the bash tool is the caller) on purpose, and not built from it
// (sandbox could import tool/shell, which does not import sandbox): most
// of the rest of shell's list names host directories and host toolchains
// (GOPATH, GOCACHE, CARGO_HOME, VIRTUAL_ENV, JAVA_HOME, LD_LIBRARY_PATH,
// XDG_*), which the sandbox does not have or, in a root filesystem, has
// elsewhere, so passing them breaks builds that work with the defaults
// under HOME=/tmp; proxies are of no use without the network. Callers of
// Box.Start or Command that pass the process's environment get only these,
// and Policy.Env (deputy.yaml's bash.env) grants more by name.
func passEnv(name string) bool {
	switch name {
	case "PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TERM", "TZ", "SHELL", "USER", "LOGNAME", "COLUMNS", "LINES":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}
