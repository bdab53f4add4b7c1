package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Identity is the author and committer of every commit deputy makes.
const (
	identityName  = "deputy"
	identityEmail = "deputy@localhost"
)

// fixedConfig is passed to every git call. Hooks, fsmonitor and textconv can
// run programs named in the user's configuration; deputy's calls run over files
// a child wrote, unattended, so none of them may fire. Signing would prompt or
// fail without an agent; automatic gc would race parallel children; color
// codes would break parsing.
var fixedConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "color.ui=false",
	"-c", "advice.detachedHead=false",
}

// gitEnv is the caller's environment without any GIT_* variable (a GIT_DIR or
// GIT_INDEX_FILE left by a hook or a test would redirect every call), plus the
// identity, a C locale (messages are matched below) and no prompts.
func gitEnv() []string {
	env := make([]string, 0, 32)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_AUTHOR_NAME="+identityName, "GIT_AUTHOR_EMAIL="+identityEmail,
		"GIT_COMMITTER_NAME="+identityName, "GIT_COMMITTER_EMAIL="+identityEmail,
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C", "LANG=C",
	)
}

// gitError is a failed git call: the command, its exit code and its stderr.
type gitError struct {
	Args   []string
	Code   int
	Stderr string
	Err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.Err }

// exitCode is the exit status of a git call that ran and failed, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

// lockBusy matches git's messages for a lock another process holds: the
// index, a ref, packed-refs, a worktree's admin files.
// ("cannot lock ref" alone is not enough: git says it too for a branch name
// that clashes with another, which no wait will fix.)
var lockBusy = regexp.MustCompile(`(?i)\.lock'?: File exists|Unable to create '[^']*\.lock'|another git process seems to be running`)

// lockRetryHook, when set by a test, is called before each wait on a busy lock.
var lockRetryHook func(attempt int)

const lockAttempts = 10

// git runs git with args (after the fixed options) and returns its stdout.
// A call that fails because another process holds one of git's lock files is
// retried with a growing wait (about 3 s in all): git's own locks fail at
// once rather than wait, and the other holder (the user's git, a child's
// git, another worker) is usually done within milliseconds.
func git(ctx context.Context, args ...string) (string, error) {
	return gitIn(ctx, nil, args...)
}

func gitIn(ctx context.Context, stdin []byte, args ...string) (string, error) {
	full := append(append([]string{}, fixedConfig...), args...)
	wait := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := runOnce(ctx, stdin, full, args)
		var ge *gitError
		if err == nil || attempt == lockAttempts || !errors.As(err, &ge) || !lockBusy.MatchString(ge.Stderr) {
			return out, err
		}
		if lockRetryHook != nil {
			lockRetryHook(attempt)
		}
		// A real timer, not an injected clock: the wait is for another
		// process to let go of a file, which happens in real time.
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return "", fmt.Errorf("%w (gave up waiting for the lock: %w)", err, ctx.Err())
		case <-timer.C:
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}

func runOnce(ctx context.Context, stdin []byte, full, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = gitEnv()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("worktree isolation needs the git binary: install git (%w)", err)
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return stdout.String(), &gitError{Args: args, Code: code, Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// repoLocks serializes deputy's own git calls per repository (keyed by the
// common dir): worktree add/remove, branch and ref updates all write the
// shared part of the repository, and git answers contention with an error
// rather than a wait. A channel, not a sync.Mutex, so a waiter can give up
// when its context ends.
var repoLocks sync.Map // common dir → chan struct{}

func lockRepo(ctx context.Context, common string) (unlock func(), err error) {
	v, _ := repoLocks.LoadOrStore(common, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for repository %s: %w", common, ctx.Err())
	}
}

// GitVersion returns the version of the git binary deputy runs ("2.39.5"),
// for a health check. Merge's conflict check without touching the tree needs
// git 2.38 or later; older versions fall back to merge and abort.
func GitVersion(ctx context.Context) (string, error) {
	out, err := git(ctx, "version")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "git version"))
	return v, nil
}
