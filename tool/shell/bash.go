// Package shell holds deputy's bash tool: one non-interactive `bash -c`
// per call, in the workspace directory, with a timeout on an injectable
// clock, and the whole process group killed on timeout, on cancellation and
// when the command returns, so a call leaves no processes behind.
//
// It does not confine what the command touches: that is the isolation
// layer's job (a sandbox around the process), not this tool's.
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
	"sync/atomic"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
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
	// the group (setsid) and still holds the output open; like
	// exec.Cmd.WaitDelay, which is also set to it (2 s).
	WaitDelay time.Duration
	Shell     string // the shell binary ("bash", found on PATH)
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
	var in struct {
		Command  string `json:"command"`
		TimeoutS int64  `json:"timeout_s"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	timeout := b.cfg.DefaultTimeout
	if in.TimeoutS > 0 {
		timeout = min(time.Duration(in.TimeoutS)*time.Second, b.cfg.MaxTimeout)
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The timer is armed before the process starts: a test that sees the
	// command running knows the timer is pending.
	var timedOut atomic.Bool
	timer := b.cfg.Clock.AfterFunc(timeout, func() {
		timedOut.Store(true)
		cancel()
	})
	defer timer.Stop()

	// Our own pipe instead of exec's copying goroutines: Wait then returns
	// as soon as bash exits, and the process group can be killed before
	// waiting for the output to end (a background job would otherwise hold
	// it open until it finished).
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("bash: %w", err)
	}
	defer pr.Close()
	cmd := exec.CommandContext(ctx, b.cfg.Shell, "-c", in.Command)
	cmd.Dir = b.cfg.Dir
	cmd.Env = b.environ()
	cmd.Stdout, cmd.Stderr = pw, pw // stdin stays nil: /dev/null
	cmd.WaitDelay = b.cfg.WaitDelay
	ownProcessGroup(cmd)
	err = cmd.Start()
	pw.Close() // the child has its copy; ours would keep the pipe from ending
	if err != nil {
		if timedOut.Load() || parent.Err() != nil {
			return "", b.stopErr(timedOut.Load(), timeout, parent)
		}
		return "", fmt.Errorf("bash: start %s: %w", b.cfg.Shell, err)
	}

	out := newCapture(b.cfg.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, pr)
		copied <- err
	}()
	_ = cmd.Wait() // the status is read from ProcessState below
	// Anything the command left running in its group dies with it.
	killProcessGroup(cmd.Process.Pid)
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
	res.WriteString(exitText(cmd.ProcessState))
	if timedOut.Load() || parent.Err() != nil {
		return res.String(), b.stopErr(timedOut.Load(), timeout, parent)
	}
	return res.String(), nil
}

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

func (b *Bash) stopErr(timedOut bool, timeout time.Duration, parent context.Context) error {
	if timedOut {
		return fmt.Errorf("command timed out after %s and was killed with all its child processes; "+
			"give a larger timeout_s (at most %d) or split the work", timeout, int(b.cfg.MaxTimeout/time.Second))
	}
	return fmt.Errorf("command cancelled (%v); it was killed with all its child processes", context.Cause(parent))
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
