// Package shell holds deputy's bash tool: one non-interactive `bash -c`
// per call, in the workspace directory, with a timeout on an injectable
// clock, and the whole process group killed on timeout, on cancellation and
// when the command returns, so a call leaves no processes behind. Each
// command is also tethered to deputy's process (package tether): on Linux
// it is pid 1 of a PID namespace of its own with a parent-death signal,
// so that if deputy dies, even by SIGKILL, the command and everything it
// started die with it, and nothing a call started goes on changing files
// after a resumed run has told the model the call was interrupted.
//
// It does not confine what the command touches itself: Config.Sandbox
// runs each command through the isolation layer (package sandbox).
package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/shell/tether"
)

// Config sets up the bash tool. Zero fields take defaults.
type Config struct {
	Dir            string        // working directory, normally the workspace root (required)
	Clock          clock.Clock   // times the timeout (clock.Real)
	DefaultTimeout time.Duration // when the call gives none (120 s)
	MaxTimeout     time.Duration // cap on a requested timeout_s (600 s)
	MaxOutput      int           // bytes of output kept, half head and half tail (30,000)
	// Env is the environment commands' variables are chosen from
	// (os.Environ() when nil): only the allowlisted ones pass, and those
	// in PassEnv (see AllowEnv).
	Env []string
	// PassEnv names more variables of Env the operator lets commands
	// have. Deputy's own (OwnEnv) never pass.
	PassEnv []string
	// WaitDelay bounds, in real time, how long the tool keeps reading after
	// the command and its process group are gone, for a process that left
	// the group (setsid) and still holds the output open (2 s).
	WaitDelay time.Duration
	Shell     string // the shell binary ("bash", found on PATH)
	// Sandbox, when set, runs every command confined (package sandbox's
	// *Box implements it). Nil runs commands directly, unconfined.
	Sandbox Sandbox
}

// Sandbox confines the commands the bash tool runs.
type Sandbox interface {
	// Start starts cmd (as the tool built it: Args, Dir, Env, Stdout,
	// Stderr, SysProcAttr) confined, in place of cmd.Start, and may
	// rewrite it to do so; the process it starts must be cmd.Process,
	// which the tool then waits for and kills as a process group leader.
	// On error nothing is left running and the process, if any, has been
	// reaped. Once the process has exited, the tool calls end: it kills
	// whatever the command left running in the sandbox, returns when all
	// of it is gone, and says why the sandbox stopped or hindered the
	// command, or "".
	Start(cmd *exec.Cmd) (end func() string, err error)
}

// Bash is the bash tool.
type Bash struct {
	cfg Config
}

// New returns the bash tool.
func New(cfg Config) (*Bash, error) {
	if cfg.Dir == "" {
		return nil, errors.New("bash tool: no working directory")
	}
	if fi, err := os.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("bash tool: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("bash tool: %s is not a directory", cfg.Dir)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 120 * time.Second
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 600 * time.Second
	}
	cfg.DefaultTimeout = min(cfg.DefaultTimeout, cfg.MaxTimeout)
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 30_000
	}
	if cfg.WaitDelay <= 0 {
		cfg.WaitDelay = 2 * time.Second
	}
	if cfg.Shell == "" {
		cfg.Shell = "bash"
	}
	return &Bash{cfg: cfg}, nil
}

// Spec implements tool.Tool.
func (b *Bash) Spec() llm.ToolSpec {
	maxS := int(b.cfg.MaxTimeout / time.Second)
	return llm.ToolSpec{
		Name: "bash",
		Description: fmt.Sprintf("Run a shell command with `bash -c` in the workspace directory and return its "+
			"stdout and stderr combined, followed by the exit code. It runs non-interactively: stdin is empty, "+
			"so never start editors, pagers or prompts. Default timeout %d s (timeout_s, at most %d s); on timeout "+
			"the command and all its child processes are killed. Processes left running in the background are "+
			"killed when the command returns, so a server started here does not outlive the call. Output over "+
			"%d bytes is cut in the middle; redirect big output to a file and read it in parts. For reading, "+
			"searching and editing files prefer read_file, grep, glob and edit_file.",
			int(b.cfg.DefaultTimeout/time.Second), maxS, b.cfg.MaxOutput),
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The bash command line to run, e.g. \"go test ./... 2>&1 | tail -50\"."},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Seconds before the command is killed. Default %d."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, maxS, int(b.cfg.DefaultTimeout/time.Second))),
	}
}

// ReadOnly implements tool.Tool: a command can change anything.
func (b *Bash) ReadOnly() bool { return false }

// Run implements tool.Tool. A command that exits non-zero is not a tool
// error: its exit code is data the model reads (grep found nothing, a test
// failed). Timeouts, cancellation and failures to start are errors.
func (b *Bash) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Command  string `json:"command"`
		TimeoutS int64  `json:"timeout_s"`
	}](input)
	if err != nil {
		return "", err
	}
	timeout := b.timeout(in.TimeoutS)

	// The timer is armed before the process starts: a test that sees the
	// command running knows the timer is pending.
	ctx, cancel := clock.WithTimeout(ctx, b.cfg.Clock, timeout, errTimeout)
	defer cancel()
	if ctx.Err() != nil {
		return "", b.stopErr(ctx, timeout)
	}

	// Our own pipe instead of exec's copying goroutines: Wait then returns
	// as soon as bash exits, and the process group can be killed before
	// waiting for the output to end (a background job would otherwise hold
	// it open until it finished).
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", startErr("", err)
	}
	defer pr.Close()
	cmd, end, release, err := b.start(in.Command, pw)
	defer release() // after the reaping below: the thread holds the tether
	pw.Close()      // the child has its copy; ours would keep the pipe from ending
	if err != nil {
		return "", startErr(b.cfg.Shell, err)
	}

	out := newCapture(b.cfg.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, pr)
		copied <- err
	}()

	stopped := killOnDone(ctx, cmd.Process)
	note, killed := endCommand(cmd, end, stopped)
	// Past WaitDelay, stop reading output held open by a process that left
	// the group.
	_ = pr.SetReadDeadline(time.Now().Add(b.cfg.WaitDelay))
	copyErr := <-copied

	res := report(out, copyErr, note, cmd.ProcessState)
	if killed {
		return res, b.stopErr(ctx, timeout)
	}
	return res, nil
}

// timeout is the call's timeout: the one it asked for, capped, or the
// default.
func (b *Bash) timeout(requestedS int64) time.Duration {
	if requestedS > 0 {
		return min(time.Duration(requestedS)*time.Second, b.cfg.MaxTimeout)
	}
	return b.cfg.DefaultTimeout
}

// start starts `bash -c command` writing to out, tethered to this process
// (through the sandbox, when there is one). end is what the sandbox must
// do once the command has exited (nothing without one); release, never
// nil, must be called once the command has been reaped or failed to start.
func (b *Bash) start(command string, out *os.File) (cmd *exec.Cmd, end func() string, release func(), err error) {
	env := b.environ()
	build := func() *exec.Cmd {
		// Not exec.CommandContext: its cancellation may kill after Wait
		// has reaped the leader, and the kill must happen before (see
		// endCommand).
		cmd := exec.Command(b.cfg.Shell, "-c", command)
		cmd.Dir = b.cfg.Dir
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = out, out // stdin stays nil: /dev/null
		ownProcessGroup(cmd)
		return cmd
	}
	end = func() string { return "" }
	if b.cfg.Sandbox != nil {
		// The sandbox has its own PID namespace, whose init bwrap ties to
		// this process with its own parent-death signal: forked from a
		// locked thread, so that it fires only when deputy dies.
		cmd = build()
		release = tether.OnLockedThread(func() { end, err = b.cfg.Sandbox.Start(cmd) })
		return cmd, end, release, err
	}
	cmd, release, err = tether.Start(build, func(cmd *exec.Cmd) error {
		if tether.Namespaced(cmd) {
			cmd.Args[2] = pid1Traps + cmd.Args[2]
		}
		return cmd.Start()
	})
	return cmd, end, release, err
}

// killOnDone kills p's whole group when ctx is done (a timeout or
// cancellation; at once, if ctx is already done). The function it returns
// ends that: after it returns, the kill has either run to completion or
// never will, and it reports whether it ran.
func killOnDone(ctx context.Context, p *os.Process) (stopped func() bool) {
	killDone := make(chan struct{})
	stopKill := context.AfterFunc(ctx, func() { defer close(killDone); killGroup(p) })
	return func() bool {
		if stopKill() {
			return false
		}
		<-killDone
		return true
	}
}

// endCommand waits for the command, kills what it left running, and reaps
// it, in the one order that never kills an unrelated process. It returns
// the sandbox's note and whether the timeout or cancellation killed it.
//
// The group id is the leader's pid, and once the leader is reaped the
// kernel may give that pid to a new process, which may lead a group of
// its own: a group kill after reaping could then hit unrelated
// processes. A zombie keeps its pid. So: wait for the leader to exit
// without reaping it, kill what is left of its group (jobs left in the
// background), make sure the cancellation kill is over and will not run,
// and only then reap.
//
// Unsandboxed on Linux, the leader is pid 1 of its own PID namespace:
// by the time waitid reports it exited, the kernel has killed and
// reaped every other process in the namespace, those that left the
// group included.
//
// With a sandbox, the leader is bwrap and the command's processes are
// in the sandbox's own session and PID namespace, out of the group's
// reach: killing bwrap kills the namespace's init (--die-with-parent),
// and end kills it too and waits until the kernel has torn the whole
// namespace down.
func endCommand(cmd *exec.Cmd, end func() string, stopped func() bool) (note string, killed bool) {
	if awaitExit(cmd.Process) {
		killGroup(cmd.Process)
		note = end()
		killed = stopped()
		_ = cmd.Wait() // reaps; the status is read from ProcessState later
		return note, killed
	}
	// No waitid (not Linux): reap first and kill afterwards, as the
	// only way left to end background jobs. The window is small: the
	// group id is free only if the group has no member left.
	_ = cmd.Wait()
	killed = stopped()
	killGroup(cmd.Process)
	note = end()
	return note, killed
}

// report is what the model reads: the output (or that there was none),
// then, each on its own line, why reading stopped early, the sandbox's
// note, and the exit status.
func report(out *capture, copyErr error, note string, ps *os.ProcessState) string {
	var res strings.Builder
	res.WriteString(out.String())
	if out.total == 0 {
		res.WriteString("(no output)")
	}
	if !strings.HasSuffix(res.String(), "\n") {
		res.WriteByte('\n')
	}
	if errors.Is(copyErr, os.ErrDeadlineExceeded) {
		res.WriteString("[a process that left the command's process group still held its output open; stopped reading]\n")
	}
	if note != "" {
		fmt.Fprintf(&res, "[sandbox: %s]\n", note)
	}
	res.WriteString(exitText(ps))
	return res.String()
}

// errTimeout is the cause the command's own timeout cancels its context
// with, which tells it apart from the caller's cancellation.
var errTimeout = errors.New("bash command timeout")

// pid1Traps goes before a command that runs as pid 1 of its own PID
// namespace. The kernel ignores a signal sent to a namespace's pid 1 from
// inside it unless pid 1 handles it, so `kill $$` (a common way for a
// script to abort itself from a subshell) would do nothing and the script
// would go on; with these traps bash exits instead, with the status a
// shell reports for a command killed by that signal (128+n). They also
// keep bash from replacing itself with a lone simple command (exec
// optimization), so the command's programs never run as pid 1
// themselves. On one line, so that the command's line numbers stay.
const pid1Traps = `trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 131' QUIT; trap 'exit 138' USR1; ` +
	`trap 'exit 140' USR2; trap 'exit 142' ALRM; trap 'exit 143' TERM; `

// startErr is the error for a command that could not be started: it says
// that the command did not run, and when the cause is a lack of resources
// (descriptors, memory, processes) that trying again later may work, so
// the model neither takes it for the command's own failure nor for
// success.
func startErr(shell string, err error) error {
	what := "could not start"
	if shell != "" {
		what += " " + shell
	}
	var hint string
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		hint = "deputy is out of file descriptors"
	case errors.Is(err, syscall.ENOMEM):
		hint = "out of memory"
	case errors.Is(err, syscall.EAGAIN):
		hint = "the process limit is reached"
	}
	if hint != "" {
		return fmt.Errorf("bash: the command did not run: %s: %w (%s; it may work if tried again later)", what, err, hint)
	}
	return fmt.Errorf("bash: the command did not run: %s: %w", what, err)
}

// environ is the command's environment: the allowlisted part of the
// configured one (AllowEnv), with PWD naming the working directory (exec
// sets PWD only when it builds the environment itself, and an inherited
// PWD would name deputy's directory).
func (b *Bash) environ() []string {
	base := b.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	return append(AllowEnv(base, b.cfg.PassEnv), "PWD="+b.cfg.Dir)
}

func (b *Bash) stopErr(ctx context.Context, timeout time.Duration) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("command timed out after %s and was killed with all its child processes; "+
			"give a larger timeout_s (at most %d) or split the work", timeout, int(b.cfg.MaxTimeout/time.Second))
	}
	return fmt.Errorf("command cancelled (%v); it was killed with all its child processes", context.Cause(ctx))
}

// exitText reports how the command ended.
func exitText(ps *os.ProcessState) string {
	if ps == nil {
		return "[exit status unknown]"
	}
	if sig, ok := signaled(ps); ok {
		return fmt.Sprintf("[killed by signal: %s]", sig)
	}
	return fmt.Sprintf("[exit code: %d]", ps.ExitCode())
}
