// Package shell holds deputy's bash tool: one non-interactive `bash -c`
// per call, in the workspace directory, with a timeout on an injectable
// clock, and the whole process group killed on timeout, on cancellation and
// when the command returns, so a call leaves no processes behind.
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
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Config sets up the bash tool. Zero fields take defaults.
type Config struct {
	Dir            string        // working directory, normally the workspace root (required)
	Clock          clock.Clock   // times the timeout (clock.Real)
	DefaultTimeout time.Duration // when the call gives none (120 s)
	MaxTimeout     time.Duration // cap on a requested timeout_s (600 s)
	MaxOutput      int           // bytes of output kept, half head and half tail (30,000)
	// Env is the environment before secret filtering (os.Environ() when
	// nil). It is always passed through FilterEnv.
	Env []string
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
	timeout := b.cfg.DefaultTimeout
	if in.TimeoutS > 0 {
		timeout = min(time.Duration(in.TimeoutS)*time.Second, b.cfg.MaxTimeout)
	}

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
		return "", fmt.Errorf("bash: %w", err)
	}
	defer pr.Close()
	// Not exec.CommandContext: its cancellation may kill after Wait has
	// reaped the leader, and the kill must happen before (see below).
	cmd := exec.Command(b.cfg.Shell, "-c", in.Command)
	cmd.Dir = b.cfg.Dir
	cmd.Env = b.environ()
	cmd.Stdout, cmd.Stderr = pw, pw // stdin stays nil: /dev/null
	ownProcessGroup(cmd)
	end := func() string { return "" }
	if b.cfg.Sandbox != nil {
		end, err = b.cfg.Sandbox.Start(cmd)
	} else {
		err = cmd.Start()
	}
	pw.Close() // the child has its copy; ours would keep the pipe from ending
	if err != nil {
		return "", fmt.Errorf("bash: start %s: %w", b.cfg.Shell, err)
	}

	out := newCapture(b.cfg.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, pr)
		copied <- err
	}()

	// A timeout or cancellation kills the whole group (at once, if ctx is
	// already done).
	killDone := make(chan struct{})
	stopKill := context.AfterFunc(ctx, func() { defer close(killDone); killGroup(cmd.Process) })
	// stopped ends the cancellation kill: after it returns, that kill has
	// either run to completion or never will. It reports whether it ran.
	stopped := func() bool {
		if stopKill() {
			return false
		}
		<-killDone
		return true
	}

	// The group id is the leader's pid, and once the leader is reaped the
	// kernel may give that pid to a new process, which may lead a group of
	// its own: a group kill after reaping could then hit unrelated
	// processes. A zombie keeps its pid. So: wait for the leader to exit
	// without reaping it, kill what is left of its group (jobs left in the
	// background), make sure the cancellation kill is over and will not run,
	// and only then reap.
	//
	// With a sandbox, the leader is bwrap and the command's processes are
	// in the sandbox's own session and PID namespace, out of the group's
	// reach: killing bwrap kills the namespace's init (--die-with-parent),
	// and end kills it too and waits until the kernel has torn the whole
	// namespace down.
	var killed bool
	var note string
	if awaitExit(cmd.Process) {
		killGroup(cmd.Process)
		note = end()
		killed = stopped()
		_ = cmd.Wait() // reaps; the status is read from ProcessState below
	} else {
		// No waitid (not Linux): reap first and kill afterwards, as the
		// only way left to end background jobs. The window is small: the
		// group id is free only if the group has no member left.
		_ = cmd.Wait()
		killed = stopped()
		killGroup(cmd.Process)
		note = end()
	}
	// Past WaitDelay, stop reading output held open by a process that left
	// the group.
	_ = pr.SetReadDeadline(time.Now().Add(b.cfg.WaitDelay))
	copyErr := <-copied

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
	res.WriteString(exitText(cmd.ProcessState))
	if killed {
		return res.String(), b.stopErr(ctx, timeout)
	}
	return res.String(), nil
}

// errTimeout is the cause the command's own timeout cancels its context
// with, which tells it apart from the caller's cancellation.
var errTimeout = errors.New("bash command timeout")

// environ is the command's environment: the configured one without
// secrets, and with PWD naming the working directory (exec sets PWD only
// when it builds the environment itself, and an inherited PWD would name
// deputy's directory).
func (b *Bash) environ() []string {
	base := b.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+1)
	for _, kv := range FilterEnv(base) {
		if !strings.HasPrefix(kv, "PWD=") && !strings.HasPrefix(kv, "OLDPWD=") {
			env = append(env, kv)
		}
	}
	return append(env, "PWD="+b.cfg.Dir)
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
