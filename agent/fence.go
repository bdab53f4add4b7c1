package agent

import (
	"context"
	"fmt"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// Fencer builds the fence of a child whose definition asks for one: a
// sandbox, a container, a git worktree. The agent package decides when
// (a child of such a type starts or resumes; it ends); the Fencer, how.
type Fencer interface {
	// Check tells, before a child is listed, whether this fence can be
	// built here (bwrap installed, the workspace a git repository); its
	// error refuses the spawn, saying how to fix it.
	Check(def *agentdef.Definition) error
	// Fence builds, or after a crash finds again, instance id's fence. It
	// is called at the start of each of the child's runs.
	Fence(ctx context.Context, id string, def *agentdef.Definition) (*Fence, error)
}

// Fence is a child's fenced place to work.
type Fence struct {
	// Tools run the child's calls inside the fence; they replace the tools
	// of the same names (whose specs the child keeps).
	Tools *tool.Set
	// Instructions, when set, tell the child's model what its fence
	// allows; they end an isolated child's system prompt (a fork keeps its
	// parent's, byte for byte, for the prompt cache).
	Instructions string
	// Note, when set, is said in the child's relay: how the fence fell
	// short of what the definition asked (unsandboxed by the config's
	// leave).
	Note string
	// End is called when the child has ended: kept says whether its work
	// is kept (it completed) or discarded. It returns the artifacts the
	// relay adds, such as a worktree's branch and its diff summary. A run
	// replayed after a crash may call it again: it must be idempotent.
	End func(ctx context.Context, kept bool) ([]string, error)
	// Dir is the directory the child works in ("" when it is the
	// parent's): where its hooks run and what their cwd says.
	Dir string
	// Starter, when set, starts the child's hook commands inside the
	// fence (its sandbox box), as its bash calls are.
	Starter hook.Starter
	// Release, when set, lets the fence go without ending it: the run
	// stopped to wait (it asks, or was paused) or the process is closing,
	// and a later run builds the fence again (Fencer.Fence) and goes on.
	Release func()
}

// fenced reports whether def asks for a fence.
func fenced(def *agentdef.Definition) bool {
	return def != nil && (def.Isolation != agentdef.IsolationNone && def.Isolation != "" || def.Worktree)
}

// checkFence refuses a spawn whose fence cannot be built: never run
// unfenced.
func (tr *tree) checkFence(def *agentdef.Definition) error {
	if !fenced(def) {
		return nil
	}
	if tr.r.Fencer == nil {
		return fmt.Errorf("spawn refused: %s asks for isolation %s (worktree %v), which this runner cannot provide",
			def.Name, def.Isolation, def.Worktree)
	}
	if err := tr.r.Fencer.Check(def); err != nil {
		return fmt.Errorf("spawn refused: %s: %w", def.Name, err)
	}
	return nil
}

// enterFence builds n's fence at the start of its run, and runs its tools
// in it.
func (tr *tree) enterFence(ctx context.Context, n *node) error {
	if !fenced(n.def) {
		return nil
	}
	if tr.r.Fencer == nil {
		return tr.checkFence(n.def) // a continued child whose runner lost its Fencer
	}
	def := n.def.Clone()
	def.Budgets.WallTime = n.cfg.Limits.WallTime // what is left of it, this run
	f, err := tr.r.Fencer.Fence(ctx, n.inst.ID, def)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	n.fence = f
	if f.Instructions != "" && agentdef.Mode(n.inst.Mode) != agentdef.ModeFork {
		n.cfg.System += "\n\n" + f.Instructions
	}
	n.cfg.Tools = n.cfg.Tools.Replace(f.Tools)
	n.avail = n.avail.Replace(f.Tools)
	return nil
}

// releaseFence lets n's fence go without ending it (Fence.Release).
func (tr *tree) releaseFence(_ context.Context, n *node) {
	if n.fence != nil && n.fence.Release != nil {
		n.fence.Release()
	}
	n.fence = nil
}

// leaveFence ends n's fence as its run ended: its work kept when it
// completed, discarded otherwise. What the fence adds (a branch and its
// diff) joins the artifacts. An error means completed work could not be
// kept: the child fails, since its work would otherwise be lost without a
// word.
func (tr *tree) leaveFence(ctx context.Context, n *node, res *loop.Result, runErr error) error {
	if n.fence == nil || n.fence.End == nil {
		return nil
	}
	kept := runErr == nil && res.StopReason == loop.StopCompleted
	arts, err := n.fence.End(context.WithoutCancel(ctx), kept)
	tr.mu.Lock()
	n.inst.Artifacts = append(n.inst.Artifacts, arts...)
	tr.mu.Unlock()
	if err != nil && kept {
		return fmt.Errorf("keeping the work (%s): %w", n.def.Name, err)
	}
	return nil
}
