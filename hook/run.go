package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool/shell"
)

// Starter starts a hook's command in place of cmd.Start: the seam through
// which hooks run inside an instance's fence. It has the shape of
// shell.Sandbox, so a *sandbox.Box is one. It may rewrite cmd to confine
// it, but the process it starts must be cmd.Process, which the Runner
// waits for and kills as a process group leader; once that process has
// exited the Runner calls end, which kills whatever the command left in
// the fence and says why the fence stopped or hindered it, or "".
type Starter interface {
	Start(cmd *exec.Cmd) (end func() string, err error)
}

// Runner runs the hooks of a Config for events. Its zero fields take
// defaults; it is safe for concurrent use.
type Runner struct {
	Config *Config
	// ProjectDir is CLAUDE_PROJECT_DIR, and where hooks run when an
	// Input has no Cwd.
	ProjectDir string
	// Env is what a command hook's environment is chosen from
	// (os.Environ() when nil): the same allowlist as the bash tool's
	// (shell.AllowEnv) and the names in PassEnv, never deputy's own
	// variables, plus CLAUDE_PROJECT_DIR. Claude Code gives hooks its
	// whole environment; deputy does not, since a hook's output reaches
	// the model and the transcript as any command's does.
	Env     []string
	PassEnv []string
	// Starter starts command hooks (in a fence); nil starts them as plain
	// processes, each the leader of a process group of its own.
	Starter Starter
	// Clock times the hooks' timeouts (clock.Real).
	Clock clock.Clock
	// HTTPClient sends http hooks (a client with no timeout of its own:
	// each hook's timeout bounds it).
	HTTPClient *http.Client
	// MaxOutput caps what is kept of each hook's stdout and of its stderr,
	// and of an http hook's response (1 MiB); the rest is read and
	// discarded, so a hook printing without end neither blocks on a full
	// pipe nor grows deputy's memory.
	MaxOutput int
	// Shell runs a command hook's command line as `Shell -c command`
	// ("sh", as Claude Code's Node spawn with shell: true does).
	Shell string
	// WaitDelay bounds, in real time, how long output is read once a
	// command and its group are gone, for a process that left the group
	// and still holds the pipes (2 s).
	WaitDelay time.Duration
}

// errTimedOut is the cause of a hook's context when its timeout passed.
var errTimedOut = errors.New("hook timed out")

// Has reports whether any hook is configured for ev, so a caller can skip
// building an Input.
func (r *Runner) Has(ev Event) bool { return r != nil && len(r.Config.Groups(ev)) > 0 }

// Run runs the hooks that match in, all at once (as Claude Code does), and
// combines their answers in configuration order (settings files in
// precedence order, then a definition's; each in the order written): the
// first updatedInput wins, the strictest permission, every block reason,
// context and error in that order. It returns once every hook has ended
// or been killed. No hook matching gives the zero Outcome at the cost of
// a map lookup.
func (r *Runner) Run(ctx context.Context, in Input) Outcome {
	if r == nil {
		return Outcome{}
	}
	hooks := r.Config.Matching(&in)
	if len(hooks) == 0 {
		return Outcome{}
	}
	dir := in.Cwd
	if dir == "" {
		dir = r.ProjectDir
	}
	body, err := in.Encode(dir)
	if err != nil {
		return Outcome{Errors: []error{err}}
	}
	results := make([]*result, len(hooks))
	if len(hooks) == 1 {
		results[0] = r.runOne(ctx, &hooks[0], body, dir)
	} else {
		var wg sync.WaitGroup
		for i := range hooks {
			wg.Go(func() { results[i] = r.runOne(ctx, &hooks[i], body, dir) })
		}
		wg.Wait()
	}
	c := combiner{ev: in.Event, tool: in.Tool, dir: dir}
	for _, res := range results {
		c.add(res)
	}
	return c.done()
}

func (r *Runner) runOne(ctx context.Context, h *Hook, body []byte, dir string) *result {
	ctx, cancel := clock.WithTimeout(ctx, r.clock(), h.Timeout, errTimedOut)
	defer cancel()
	var res *result
	if h.Type == TypeHTTP {
		res = r.runHTTP(ctx, h, body)
	} else {
		res = r.runCommand(ctx, h, body, dir)
	}
	if res.err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errTimedOut) {
			res.err = fmt.Errorf("timed out after %s: %w", h.Timeout, res.err)
		} else if cause != nil {
			res.err = fmt.Errorf("%w (%v)", res.err, cause)
		}
	}
	return res
}

func (r *Runner) clock() clock.Clock {
	if r.Clock == nil {
		return clock.Real
	}
	return r.Clock
}

func (r *Runner) maxOutput() int {
	if r.MaxOutput <= 0 {
		return 1 << 20
	}
	return r.MaxOutput
}

func (r *Runner) baseEnv() []string {
	if r.Env == nil {
		return os.Environ()
	}
	return r.Env
}

func (r *Runner) environ() []string {
	env := shell.AllowEnv(r.baseEnv(), r.PassEnv)
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CLAUDE_PROJECT_DIR=") })
	return append(env, "CLAUDE_PROJECT_DIR="+r.ProjectDir)
}

// runCommand runs `sh -c command` with the input on stdin, in its own
// process group; at the timeout (or the caller's cancellation) the whole
// group is killed, and when the command exits whatever it left running in
// its group is killed too.
func (r *Runner) runCommand(ctx context.Context, h *Hook, body []byte, dir string) *result {
	res := &result{hook: h}
	sh := r.Shell
	if sh == "" {
		sh = "sh"
	}
	// Not exec.CommandContext: its kill may come after Wait reaped the
	// leader, when the group id may already be another's (see endCommand).
	cmd := exec.Command(sh, "-c", h.Command)
	cmd.Dir = dir
	cmd.Env = r.environ()
	cmd.Stdin = bytes.NewReader(body)
	out, errOut := &capped{max: r.maxOutput()}, &capped{max: r.maxOutput()}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	ownProcessGroup(cmd)
	end := func() string { return "" }
	var err error
	if r.Starter != nil {
		end, err = r.Starter.Start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		res.err = fmt.Errorf("could not start: %w", err)
		return res
	}
	note, killed, waitErr := endCommand(cmd, end, killOnDone(ctx, cmd.Process))
	res.stdout, res.stderr = out.String(), errOut.String()
	for _, c := range []struct {
		name string
		c    *capped
	}{{"stdout", out}, {"stderr", errOut}} {
		if c.c.total > int64(len(c.c.buf)) {
			res.notes = append(res.notes, fmt.Errorf("%s (%s): %s cut at %d bytes of %d; the rest was discarded", h, h.Source, c.name, len(c.c.buf), c.c.total))
		}
	}
	if note != "" {
		res.notes = append(res.notes, fmt.Errorf("%s (%s): %s", h, h.Source, note))
	}
	switch {
	case killed:
		res.err = errors.New("killed with its process group")
	case errors.Is(waitErr, exec.ErrWaitDelay):
		// It exited, but something it started holds its output open.
		res.notes = append(res.notes, fmt.Errorf("%s (%s): output still held open %s after it exited; stopped reading", h, h.Source, cmd.WaitDelay))
	}
	if res.err == nil {
		res.exit = cmd.ProcessState.ExitCode()
		if res.exit < 0 {
			res.err = fmt.Errorf("ended by a signal: %s", cmd.ProcessState)
		}
	}
	return res
}

// killOnDone kills p's whole group when ctx is done. The function it
// returns ends that: afterwards the kill has either run to completion or
// never will, and it reports whether it ran.
func killOnDone(ctx context.Context, p *os.Process) (stopped func() bool) {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(done); killGroup(p) })
	return func() bool {
		if stop() {
			return false
		}
		<-done
		return true
	}
}

// endCommand waits for the command to exit without reaping it, kills what
// is left of its group, makes sure the timeout's kill is over, and only
// then reaps: the group id is the leader's pid, which the kernel may give
// to another process once the leader is reaped, so no kill may come after.
// Where there is no waitid it reaps first (a small window).
func endCommand(cmd *exec.Cmd, end func() string, stopped func() bool) (note string, killed bool, waitErr error) {
	if awaitExit(cmd.Process) {
		killGroup(cmd.Process)
		note = end()
		killed = stopped()
		return note, killed, cmd.Wait()
	}
	waitErr = cmd.Wait()
	killed = stopped()
	killGroup(cmd.Process)
	return end(), killed, waitErr
}

// capped keeps the first max bytes written and counts the rest. exec's
// copying goroutine writes it; it is read after Wait.
type capped struct {
	buf   []byte
	max   int
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string { return string(c.buf) }

// runHTTP POSTs the input to the hook's URL. A 2xx answer's body is read
// as a command's stdout after exit 0; any other status, a failure to
// connect, or the timeout is a non-blocking error, as in Claude Code (an
// http hook blocks only by answering with a decision).
func (r *Runner) runHTTP(ctx context.Context, h *Hook, body []byte) *result {
	res := &result{hook: h}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		res.err = errors.New("bad request") // the URL was checked at load; never print it with its userinfo
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	for _, hd := range h.Headers {
		req.Header.Set(hd.Name, r.interpolate(hd.Value, h.AllowedEnvVars))
	}
	client := r.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, userinfo and all
		}
		res.err = fmt.Errorf("POST failed: %w", err)
		return res
	}
	defer resp.Body.Close()
	c := &capped{max: r.maxOutput()}
	n, err := io.Copy(c, io.LimitReader(resp.Body, int64(r.maxOutput())*4))
	if err != nil {
		res.err = fmt.Errorf("reading the answer: %w", err)
		return res
	}
	if n > int64(len(c.buf)) {
		res.notes = append(res.notes, fmt.Errorf("%s (%s): answer cut at %d bytes; the rest was discarded", h, h.Source, len(c.buf)))
	}
	if resp.StatusCode/100 != 2 {
		res.err = fmt.Errorf("HTTP %s: %s", resp.Status, excerpt(c.String(), 200))
		return res
	}
	res.stdout = c.String()
	return res
}

// interpolate expands $NAME and ${NAME} in a header value from the
// environment, for the names the hook allows only, and never deputy's own
// variables (shell.OwnEnv); any other reference becomes empty.
func (r *Runner) interpolate(v string, allowed []string) string {
	if !strings.Contains(v, "$") {
		return v
	}
	return os.Expand(v, func(name string) string {
		if !slices.Contains(allowed, name) || shell.OwnEnv(name) {
			return ""
		}
		for _, kv := range r.baseEnv() {
			if k, val, ok := strings.Cut(kv, "="); ok && k == name {
				return val
			}
		}
		return ""
	})
}

func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
