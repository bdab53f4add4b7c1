package deputy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
)

// Fan-out types, from package agent.
type (
	// FanTask is one task of a fan-out: a subagent type, its task, the
	// tasks it depends on, its own tools and timeout.
	FanTask = agent.FanTask
	// FanResult is how one task ended: its report (partial and marked
	// incomplete after a timeout), artifacts, usage and time.
	FanResult = agent.FanResult
	// Vote is the outcome of the vote merge.
	Vote = agent.Vote
)

// Merge strategies.
const (
	MergeConcat    = agent.MergeConcatName    // every report, under its task's id, in the tasks' order
	MergeSummarize = agent.MergeSummarizeName // one more model call (a child) writes a summary
	MergeVote      = agent.MergeVoteName      // the majority answer, or a judge's pick
)

// FanOut is a planned batch of subagents: tasks run at most MaxParallel at
// once, each after the tasks it depends on (with their reports), and
// their reports merged.
type FanOut struct {
	// Tasks are the batch's tasks; a cycle or a dependency on no task is
	// refused before anything starts.
	Tasks []FanTask
	// MaxParallel is how many tasks run at once (default Options.MaxParallel,
	// else 8).
	MaxParallel int
	// Merge is MergeConcat (the default), MergeSummarize (one model call
	// within Limit characters, at least 200) or MergeVote (majority; with
	// Judge, a subagent of that type picks).
	Merge string
	Limit int
	Judge string
	// MergeFunc, when set, merges the results itself: FanOutResult.Merged
	// is what it returns.
	MergeFunc func([]FanResult) (string, error)
	// Model runs the subagents whose type inherits it; default
	// Options.ModelSpec (or Model).
	Model string
}

// FanOutResult is a fan-out's outcome.
type FanOutResult struct {
	// ID is the instance that ran the fan-out: its tasks are its children.
	ID string
	// Merged is the merge's text (MergeFunc's, when given).
	Merged string
	// Vote is the vote's outcome, for MergeVote.
	Vote *Vote
	// Merger is the subagent that summarized or judged, if any.
	Merger *FanResult
	// Results are the tasks' outcomes, in the tasks' order.
	Results []FanResult
	// Usage is the whole fan-out's, merge included.
	Usage llm.Usage
}

// FanOut runs a fan-out and waits for it. Its instance is durable: if the
// process dies, the next Open resumes it, and WaitFanOut with the id
// StartFanOut returned collects it.
func (rt *Runtime) FanOut(ctx context.Context, f FanOut) (*FanOutResult, error) {
	id, err := rt.StartFanOut(ctx, f)
	if err != nil {
		return nil, err
	}
	res, err := rt.WaitFanOut(ctx, id)
	if err != nil || f.MergeFunc == nil {
		return res, err
	}
	merged, err := f.MergeFunc(res.Results)
	if err != nil {
		return res, fmt.Errorf("deputy: merge: %w", err) // res keeps the built-in merge
	}
	res.Merged = merged
	return res, nil
}

// StartFanOut checks a fan-out (a cycle or a missing dependency is an
// error before anything starts) and starts it in the background.
func (rt *Runtime) StartFanOut(ctx context.Context, f FanOut) (string, error) {
	if _, err := agent.PlanFanOut(f.Tasks); err != nil {
		return "", fmt.Errorf("deputy: fan-out: %w", err)
	}
	// What the fan_out tool would refuse inside the run, refused here,
	// before anything is recorded.
	switch {
	case f.Merge != "" && f.Merge != MergeConcat && f.Merge != MergeSummarize && f.Merge != MergeVote:
		return "", fmt.Errorf("deputy: fan-out: merge %q is not %s, %s or %s", f.Merge, MergeConcat, MergeSummarize, MergeVote)
	case f.Judge != "" && f.Merge != MergeVote:
		return "", errors.New("deputy: fan-out: Judge goes with MergeVote")
	case f.Limit < 0 || f.Limit > 0 && f.Limit < 200:
		return "", fmt.Errorf("deputy: fan-out: Limit %d: at least 200 characters", f.Limit)
	}
	if _, ok := rt.eng.Catalog().Lookup(f.Judge); f.Judge != "" && !ok {
		return "", fmt.Errorf("deputy: fan-out: judge %q is not a subagent type", f.Judge)
	}
	in := agent.FanOutInput{Merge: f.Merge, Limit: f.Limit, Judge: f.Judge, Format: "json"}
	for _, t := range f.Tasks {
		in.Tasks = append(in.Tasks, agent.FanTaskInput{FanTask: t, TimeoutSeconds: t.Timeout.Seconds()})
	}
	plan, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	spec := rt.spec(Task{MaxParallel: f.MaxParallel}, rt.Definition)
	spec.Model, spec.ChildModel = agent.PlannerModel, cmp.Or(f.Model, rt.ms.ownSpec)
	if spec.ChildModel == "" {
		// The planner needs no model, its tasks do: refused as Start
		// refuses a root on none (hasModel).
		return "", fmt.Errorf("deputy: fan-out: %w: no model: the runtime has none (Options.ModelSpec, Options.Model) and FanOut.Model is empty", ErrRefused)
	}
	// The planner's one call is fan_out, whatever the runtime's roots are
	// offered by default.
	spec.Offer = nil
	return rt.eng.Start(ctx, string(plan), spec)
}

// WaitFanOut waits for fan-out id and returns its results.
func (rt *Runtime) WaitFanOut(ctx context.Context, id string) (*FanOutResult, error) {
	in, err := rt.Wait(ctx, id)
	if err != nil {
		return nil, err
	}
	if in.State != Completed {
		return nil, fmt.Errorf("deputy: fan-out %s %s: %s", id, in.State, in.Error)
	}
	var out agent.FanOutput
	if err := json.Unmarshal([]byte(in.Report), &out); err != nil {
		return nil, fmt.Errorf("deputy: fan-out %s: %s", id, agentdef.OneLine(in.Report, 300))
	}
	res := &FanOutResult{ID: id, Merged: out.Merged, Vote: out.Vote, Merger: out.Merger, Results: out.Results,
		Usage: in.Usage}
	// The root's own usage is the planner's (none); each result's covers
	// its task's subtree.
	for _, r := range out.Results {
		res.Usage.Add(r.Usage)
	}
	if out.Merger != nil {
		res.Usage.Add(out.Merger.Usage)
	}
	return res, nil
}
