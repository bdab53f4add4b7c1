// Package fence builds the fences of children whose definitions ask for
// one (agent.Fencer): a git worktree (worktree: true), a process sandbox
// (isolation: sandbox) or a container over its own root filesystem
// (isolation: container), alone or combined. A fence is the child's own
// workspace directory and tools rebuilt to work in it; ending it keeps the
// child's work (a commit on its branch, a snapshot applied) or drops it.
package fence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/shell"
	"github.com/deputy-run/deputy/worktree"
)

// Protected are the workspace's paths a fenced child may read but never
// change, with its programs or its file tools, whether or not they exist
// yet (a trailing "/" says a path is a directory, for the sandbox's
// placeholder when it does not): every path deputy reads definitions,
// settings, skills or configuration from, and what git executes. A child
// that could write one would run its code outside the fence at the next
// run or git command.
var Protected = []string{
	// A planted hook or config (core.pager, core.fsmonitor, a filter)
	// would run at the user's next git command; in a worktree it is the
	// .git file that points to the repository.
	".git/",
	// deputy's own: agents/*.md and skills/*/SKILL.md (the catalog and
	// skills, agent.ProjectDirs and ProjectSkillDirs), deputy.db (the
	// default database), token (the server's), executor-id. Hidden as
	// well: see Hidden.
	".deputy/",
	// Claude Code's layout, which deputy also loads: agents/*.md (whose
	// mcpServers commands deputy starts unsandboxed) and skills/; its
	// settings.json and hooks are Claude Code's own code execution.
	".claude/",
	// Tiers and models, which environment variables MCP servers may read
	// (mcp.env), and isolation.allow_unsandboxed.
	"deputy.yaml",
}

// Hidden are the workspace's paths a fenced child cannot even read, with
// its sandboxed programs or its file tools (builtin.Config.Hidden: they
// run in deputy's process, outside the sandbox): .deputy holds the
// database of every run's transcripts (what other runs read and wrote,
// tool output included) and the server's token. A child needs none of it:
// its definition, skills and instructions reach it through deputy.
var Hidden = []string{".deputy/"}

// Fencer is agent.Fencer for children of roots working in Workspace.
type Fencer struct {
	// Workspace is the root's workspace: a worktree is made of the git
	// repository holding it; a sandbox lets programs write only there
	// (or in the worktree).
	Workspace string
	Config    agentdef.IsolationConfig
	// Env names variables of deputy's environment the sandbox passes to
	// a child's programs beyond its own few (sandbox.Policy.Env):
	// deputy.yaml's bash.env, which Tools must grant too, since a command
	// gets only what both bash's allowlist and the sandbox's let through.
	Env []string
	// Tools builds a child's tools for a directory, its commands run
	// through sb when set, Protected read-only and Hidden hidden
	// (builtin.Tools with Workspace, Sandbox, ReadOnly and Hidden).
	Tools func(dir string, sb shell.Sandbox) (*tool.Set, error)
	Clock clock.Clock
	// StateDir holds sandboxes' /tmp and snapshots (os.TempDir()).
	StateDir string
	// Bwrap is the bubblewrap binary ("bwrap" on PATH).
	Bwrap string
	// Warn prints a tripwire's finding where the person running deputy
	// reads it, beyond the child's relay and record (nil: a line on
	// os.Stderr).
	Warn func(error)
}

// Check implements agent.Fencer: it refuses what cannot be built here,
// with the fix.
func (f *Fencer) Check(def *agentdef.Definition) error {
	if def.Worktree {
		if err := worktree.Check(context.Background(), f.Workspace); err != nil {
			return err
		}
	}
	switch def.Isolation {
	case agentdef.IsolationSandbox:
		if err := sandbox.AvailableAt(f.Bwrap); err != nil && !f.Config.AllowUnsandboxed {
			return fmt.Errorf("%w (or set isolation.allow_unsandboxed in deputy.yaml to run it unsandboxed)", err)
		}
	case agentdef.IsolationContainer:
		if f.Config.RootFS == "" {
			return errors.New("isolation container needs a root filesystem: set isolation.rootfs in deputy.yaml " +
				"(a directory made with debootstrap, for example)")
		}
		if err := sandbox.Check(f.Bwrap, f.Config.RootFS).Container(); err != nil {
			return err
		}
	}
	return nil
}

// gitDirs returns a worktree's repository directory (shared by every
// worktree) and its own admin directory, symlinks resolved.
func gitDirs(root string) (common, admin string, err error) {
	cmd := exec.Command("git", "-C", root, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	out, err := cmd.Output()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 {
		return "", "", fmt.Errorf("worktree %s: git rev-parse: %v", root, err)
	}
	if common, err = filepath.EvalSymlinks(lines[0]); err == nil {
		admin, err = filepath.EvalSymlinks(lines[1])
	}
	return common, admin, err
}

// Fence implements agent.Fencer: the child's worktree (made, or found
// again after a crash), its sandbox, and its tools working in them.
func (f *Fencer) Fence(ctx context.Context, id string, def *agentdef.Definition) (*agent.Fence, error) {
	// A tripwire that fired here and was not reviewed: a fence would take
	// whatever was planted as its record of the trusted files.
	if err := CheckTrusted(f.Workspace); err != nil {
		return nil, err
	}
	dir := f.Workspace
	var tree *worktree.Tree
	if def.Worktree {
		t, err := worktree.Add(ctx, f.Workspace, id)
		if err != nil {
			return nil, err
		}
		tree, dir = t, t.Dir
	}
	// The tripwire's record of what deputy trusts in the parent's
	// workspace and in the child's worktree, before any of the child's
	// tools runs.
	trip := newTripwire(f.Workspace)
	if tree != nil {
		trip = newTripwire(f.Workspace, dir)
	}
	box, note, err := f.makeBox(dir, def, tree)
	if err != nil {
		f.drop(ctx, tree)
		return nil, err
	}
	var sb shell.Sandbox
	if box != nil {
		dir = box.Dir() // a container's snapshot, when it has one
		sb = box
	}
	tools, err := f.Tools(dir, sb)
	if err != nil {
		if box != nil {
			_ = box.Close()
		}
		f.drop(ctx, tree)
		return nil, err
	}
	snapshot := box != nil && def.Isolation == agentdef.IsolationContainer
	f2 := &agent.Fence{Tools: tools, Note: note, Instructions: instructions(tree, box), Dir: dir,
		End: func(ctx context.Context, kept bool) ([]string, error) {
			return f.end(ctx, id, box, snapshot, tree, trip, kept)
		},
		// The worktree stays for the next run; the box goes (a
		// container's snapshot with it: its next run starts a fresh one).
		// The tripwire looks first: the next run's fence starts a new
		// record, which would take a planted file as it found it.
		Release: func() {
			_ = f.tripped(trip.check(id))
			if box != nil {
				_ = box.Close()
			}
		}}
	if box != nil {
		f2.Starter = box // the child's hooks run in its box (a nil *Box would be a non-nil Starter)
	}
	return f2, nil
}

// makeBox makes the sandbox of a child working in dir (in tree, when it
// has a worktree), if its isolation asks for one; nil when it does not.
// A sandbox that cannot be made here is an error, unless deputy.yaml
// allows running unsandboxed and bubblewrap is missing: then the box is
// nil and note says so, for the child's record.
func (f *Fencer) makeBox(dir string, def *agentdef.Definition, tree *worktree.Tree) (box *sandbox.Box, note string, err error) {
	if def.Isolation != agentdef.IsolationSandbox && def.Isolation != agentdef.IsolationContainer {
		return nil, "", nil
	}
	p := f.policy(dir, def)
	if tree != nil {
		// git reads the repository (read-only: its hooks and config
		// stay out of reach) and keeps this worktree's index and HEAD
		// in its own admin directory (writable).
		common, admin, err := gitDirs(tree.Root)
		if err != nil {
			return nil, "", err
		}
		p.ReadPaths = append(slices.Clone(p.ReadPaths), common)
		p.WritePaths = append(slices.Clone(p.WritePaths), admin)
	}
	box, err = sandbox.New(p)
	switch {
	case err != nil && def.Isolation == agentdef.IsolationSandbox && f.Config.AllowUnsandboxed && sandbox.AvailableAt(f.Bwrap) != nil:
		return nil, "This subagent ran WITHOUT its sandbox (" + agentdef.OneLine(err.Error(), 300) + "): deputy.yaml allows it.", nil
	case err != nil:
		return nil, "", err
	}
	return box, "", nil
}

// instructions tells a fenced child what its fence means for its work:
// where its changes go, and what the sandbox allows.
func instructions(tree *worktree.Tree, box *sandbox.Box) string {
	var say []string
	if tree != nil {
		say = append(say, "You work in your own git worktree, on branch "+tree.Branch+": nobody else sees your "+
			"changes until your parent merges them, which it can once you complete. Do not commit: deputy "+
			"commits your changes on the branch when you complete.")
		if box != nil {
			say = append(say, "In the sandbox git can read the repository (status, diff, log) but not write to it.")
		}
	}
	if box != nil {
		say = append(say, box.Description())
	}
	return strings.Join(say, " ")
}

// policy is the sandbox of a child working in dir.
func (f *Fencer) policy(dir string, def *agentdef.Definition) sandbox.Policy {
	p := sandbox.Policy{
		Workspace:    dir,
		Protect:      Protected,
		Hide:         Hidden,
		Env:          f.Env,
		WritePaths:   def.WritePaths,
		ReadPaths:    def.ReadPaths,
		Network:      len(def.Network) > 0, // host lists are not enforced: any grant opens the network
		CPUSeconds:   f.Config.CPUSeconds,
		MemoryBytes:  int64(f.Config.MemoryMB) << 20,
		MaxProcesses: f.Config.Processes,
		CPUs:         f.Config.CPUs,
		StateDir:     f.StateDir,
		Clock:        f.Clock,
		Bwrap:        f.Bwrap,
	}
	if def.Isolation == agentdef.IsolationContainer {
		// Its own root filesystem, a snapshot of the workspace kept only
		// when it completes, and everything killed at its hard timeout.
		p.RootFS, p.Snapshot, p.HardTimeout = f.Config.RootFS, true, def.Budgets.WallTime
	}
	return p
}

// end keeps or drops a child's work: a completed child's snapshot is
// applied and its worktree committed on its branch (which stays, for the
// parent or `deputy merge`); anything else is dropped and nothing reaches
// the parent's tree. First the tripwire: when files deputy trusts changed
// while the child ran, the fence did not hold (or something outside it
// wrote there meanwhile); its work is dropped and the error names them,
// in its relay and its record, on stderr, and in the workspace's
// UntrustedFile, which stops deputy loading them at its next start.
func (f *Fencer) end(ctx context.Context, id string, box *sandbox.Box, snapshot bool, tree *worktree.Tree,
	trip *tripwire, kept bool) ([]string, error) {
	var arts []string
	var errs []error
	if err := f.tripped(trip.check(id)); err != nil {
		arts = append(arts, err.Error())
		errs, kept = append(errs, err), false
	}
	if box != nil {
		if kept && snapshot {
			if ch, err := box.Commit(); err != nil {
				errs, kept = append(errs, err), false
			} else if n := len(ch.Added) + len(ch.Modified) + len(ch.Deleted); n > 0 {
				arts = append(arts, fmt.Sprintf("snapshot applied: %d added, %d modified, %d deleted",
					len(ch.Added), len(ch.Modified), len(ch.Deleted)))
			}
		}
		if err := box.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if tree != nil {
		if kept {
			sum, err := tree.Commit(ctx, "deputy: work of "+id)
			if err != nil {
				errs = append(errs, err)
			} else if sum.Changed() {
				arts = append(arts, sum.String())
			}
		}
		if err := tree.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return arts, errors.Join(errs...)
}

// tripped records a tripwire's finding, err from tripwire.check, when
// there is one: in the workspace's UntrustedFile (a failure to write it
// joins err) and on stderr (Warn). It returns err.
func (f *Fencer) tripped(err error) error {
	var tw *TripwireError
	if !errors.As(err, &tw) {
		return err
	}
	now := time.Now()
	if f.Clock != nil {
		now = f.Clock.Now()
	}
	if merr := markUntrusted(f.Workspace, tw, now); merr != nil {
		err = errors.Join(err, fmt.Errorf("recording it in %s: %w", filepath.Join(f.Workspace, UntrustedFile), merr))
	}
	if f.Warn != nil {
		f.Warn(err)
	} else {
		fmt.Fprintln(os.Stderr, "deputy: WARNING:", err)
	}
	return err
}

// drop removes a worktree made for a fence that could not be finished.
func (f *Fencer) drop(ctx context.Context, tree *worktree.Tree) {
	if tree != nil {
		_ = tree.Remove(context.WithoutCancel(ctx))
	}
}

// Prune removes the worktrees of instances that are no longer alive in
// the repository holding workspace (a worker that died left them).
func Prune(ctx context.Context, workspace string, alive func(id string) bool) ([]string, error) {
	if worktree.Check(ctx, workspace) != nil {
		return nil, nil
	}
	return worktree.Prune(ctx, workspace, alive)
}
