package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// FanTask is one task of a fan-out: a subagent type and its task, with
// the tasks it depends on (whose reports it receives) and its own limits.
type FanTask struct {
	ID      string `json:"id"`
	Type    string `json:"subagent_type"`
	Task    string `json:"task"`
	Context string `json:"context,omitempty"` // a snippet put before the task
	// Tools narrows the type's allowlist for this task; none: the type's.
	Tools     []string      `json:"tools,omitempty"`
	Timeout   time.Duration `json:"-"` // hard; the soft one is at SoftTimeoutShare
	DependsOn []string      `json:"depends_on,omitempty"`
	// RunAnyway runs the task even when a dependency did not complete
	// (its report then says how that dependency ended).
	RunAnyway bool `json:"run_anyway,omitempty"`
}

// PlanFanOut checks a fan-out before anything starts, and orders it: every
// id is set and unique, every dependency names a task of the fan-out, and
// there is no cycle (the error names one). The order is one a scheduler
// may start the tasks in: each after its dependencies, and otherwise as
// given.
func PlanFanOut(tasks []FanTask) ([]FanTask, error) {
	index := make(map[string]int, len(tasks))
	var errs []error
	for i, t := range tasks {
		switch _, dup := index[t.ID]; {
		case strings.TrimSpace(t.ID) == "":
			errs = append(errs, fmt.Errorf("task %d has no id", i+1))
		case dup:
			errs = append(errs, fmt.Errorf("task id %q is used twice", t.ID))
		default:
			index[t.ID] = i
		}
	}
	for _, t := range tasks {
		for _, d := range t.DependsOn {
			if _, ok := index[d]; !ok {
				errs = append(errs, fmt.Errorf("task %q depends on %q, which is not a task of this fan-out", t.ID, d))
			}
			if d == t.ID {
				errs = append(errs, fmt.Errorf("task %q depends on itself", t.ID))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Depth-first, in input order, so the order is stable; a task met
	// again while on the path closes a cycle.
	const (
		unseen = iota
		onPath
		placed
	)
	mark := make([]int, len(tasks))
	order := make([]FanTask, 0, len(tasks))
	var path []string
	var visit func(i int) error
	visit = func(i int) error {
		switch mark[i] {
		case placed:
			return nil
		case onPath:
			at := slices.Index(path, tasks[i].ID)
			return fmt.Errorf("the dependencies form a cycle: %s", strings.Join(append(path[at:], tasks[i].ID), " -> "))
		}
		mark[i] = onPath
		path = append(path, tasks[i].ID)
		for _, d := range tasks[i].DependsOn {
			if err := visit(index[d]); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		mark[i] = placed
		order = append(order, tasks[i])
		return nil
	}
	for i := range tasks {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// FanResult is how one task of a fan-out ended.
type FanResult struct {
	ID     string `json:"id"`
	State  string `json:"state"` // a relay's state, or "skipped"
	Report string `json:"report"`
	// Skipped says why a task did not run (a dependency that did not
	// complete).
	Skipped    string   `json:"skipped,omitempty"`
	Incomplete bool     `json:"incomplete,omitempty"`
	Artifacts  []string `json:"artifacts,omitempty"`
}

// StateSkipped is the state of a fan-out task that never ran.
const StateSkipped = "skipped"

// MergeConcat is the concat merge: the reports in task order, each under
// its task's heading, with how it ended when that was not a completion.
func MergeConcat(results []FanResult) string {
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + r.ID)
		switch {
		case r.State == StateSkipped:
			b.WriteString(" (skipped: " + r.Skipped + ")")
		case r.State != StateCompleted || r.Incomplete:
			b.WriteString(" (" + r.State)
			if r.Incomplete {
				b.WriteString(", incomplete")
			}
			b.WriteString(")")
		}
		if report := strings.TrimSpace(r.Report); report != "" {
			b.WriteString("\n" + report)
		}
	}
	return b.String()
}

// Vote is the outcome of the vote merge.
type Vote struct {
	// Answer is the winning answer as its first voter wrote it; empty on
	// a tie or when nobody answered.
	Answer string `json:"answer"`
	Votes  int    `json:"votes"`
	// Tie lists the answers sharing the most votes when there is no
	// single winner, in the order they first appeared.
	Tie []string `json:"tie,omitempty"`
	// Counted is how many answers were counted: completed tasks only.
	Counted int `json:"counted"`
}

// MergeVote is the majority vote over the completed tasks' answers,
// normalized (trimmed, case-folded, whitespace collapsed) before they are
// compared; ties are reported as ties, never broken silently.
func MergeVote(results []FanResult) Vote {
	type tally struct {
		first string
		n     int
	}
	var order []string
	counts := map[string]*tally{}
	v := Vote{}
	for _, r := range results {
		if r.State != StateCompleted || r.Incomplete {
			continue
		}
		key := strings.ToLower(strings.Join(strings.Fields(r.Report), " "))
		if key == "" {
			continue
		}
		v.Counted++
		t, ok := counts[key]
		if !ok {
			t = &tally{first: strings.TrimSpace(r.Report)}
			counts[key] = t
			order = append(order, key)
		}
		t.n++
	}
	for _, k := range order {
		switch n := counts[k].n; {
		case n > v.Votes:
			v.Votes, v.Tie = n, []string{counts[k].first}
		case n == v.Votes:
			v.Tie = append(v.Tie, counts[k].first)
		}
	}
	if len(v.Tie) == 1 {
		v.Answer, v.Tie = v.Tie[0], nil
	}
	return v
}

// FanOutTool is the tool a parent model runs a planned batch of subagents
// with: tasks, their dependencies, and how to merge their reports.
const FanOutTool = "fan_out"

var fanOutSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"tasks":{"type":"array","minItems":1,"items":{"type":"object","properties":{` +
	`"id":{"type":"string","minLength":1,"description":"A short name, unique in this call, that depends_on refers to."},` +
	`"subagent_type":{"type":"string","description":"One of the types spawn_subagent lists."},` +
	`"task":{"type":"string","minLength":1,"description":"The complete task, as for spawn_subagent."},` +
	`"context":{"type":"string","description":"Facts the subagent needs, put before the task."},` +
	`"tools":{"type":"array","items":{"type":"string"},"description":"Only these of the type's tools."},` +
	`"timeout_seconds":{"type":"number","exclusiveMinimum":0,"description":"Stop it after this long; its partial report comes back marked incomplete."},` +
	`"depends_on":{"type":"array","items":{"type":"string"},"description":"Ids of tasks that must end first; their reports are given to this one."},` +
	`"run_anyway":{"type":"boolean","description":"Run even if a task it depends on did not complete."}` +
	`},"required":["id","subagent_type","task"],"additionalProperties":false}},` +
	`"merge":{"type":"string","enum":["concat","vote"],"description":"concat (default): every report under its task's heading. vote: the majority answer among the completed tasks, ties reported."}` +
	`},"required":["tasks"],"additionalProperties":false}`)

type fanOutInput struct {
	Tasks []struct {
		FanTask
		TimeoutSeconds float64 `json:"timeout_seconds"`
	} `json:"tasks"`
	Merge string `json:"merge"`
}

// fanOutTool is fan_out: one call runs a planned set of subagents, each
// as spawn_subagent would (same caps, depth and budgets), each task once
// the tasks it depends on have ended, and merges their reports.
type fanOutTool struct{ tree *tree }

func (f fanOutTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: FanOutTool, InputSchema: fanOutSchema, Description: "Run several subagents as one " +
		"planned batch: independent tasks at the same time (up to the same limit as spawn_subagent), a task " +
		"with depends_on after those it names, receiving their reports. Returns every task's report, merged " +
		"as asked; one task's failure or timeout never loses the others' results. Use it for broad work " +
		"split in parts, or comparisons; not for a single lookup."}
}

// ReadOnly is false: its subagents may change the workspace.
func (fanOutTool) ReadOnly() bool { return false }

// Concurrent: it bounds and orders its own subagents.
func (fanOutTool) Concurrent() bool { return true }

// Resumable as spawn_subagent is: its children are named after the call
// and their task ids.
func (f fanOutTool) Resumable() bool { return f.tree.r.Children != nil }

func (f fanOutTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	parent := nodeFrom(ctx)
	if parent == nil {
		return "", errors.New("fan_out runs only inside a deputy agent run")
	}
	in, err := tool.Decode[fanOutInput](raw)
	if err != nil {
		return "", err
	}
	tasks := make([]FanTask, len(in.Tasks))
	for i, t := range in.Tasks {
		tasks[i] = t.FanTask
		tasks[i].Timeout = time.Duration(t.TimeoutSeconds * float64(time.Second))
	}
	if _, err := PlanFanOut(tasks); err != nil {
		return "", fmt.Errorf("fan_out refused: %w", err)
	}
	results := f.tree.fanOut(ctx, parent, tasks)
	if in.Merge == "vote" {
		v := MergeVote(results)
		var b strings.Builder
		switch {
		case v.Answer != "":
			fmt.Fprintf(&b, "vote: %q with %d of %d answers", v.Answer, v.Votes, v.Counted)
		case len(v.Tie) > 0:
			fmt.Fprintf(&b, "vote: a tie at %d of %d answers between %q", v.Votes, v.Counted, v.Tie)
		default:
			b.WriteString("vote: no task completed with an answer")
		}
		return b.String() + "\n\n" + MergeConcat(results), nil
	}
	return MergeConcat(results), nil
}

// fanOut runs tasks (planned: no cycle, every dependency present) as
// children of parent, each when its dependencies have ended, and returns
// their results in task order. A task whose dependency did not complete
// is skipped, unless it runs anyway.
func (tr *tree) fanOut(ctx context.Context, parent *node, tasks []FanTask) []FanResult {
	results := make([]FanResult, len(tasks))
	ended := make(map[string]chan struct{}, len(tasks))
	at := make(map[string]int, len(tasks))
	for i, t := range tasks {
		ended[t.ID], at[t.ID] = make(chan struct{}), i
	}
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ended[t.ID])
			var deps []FanResult
			for _, d := range t.DependsOn {
				<-ended[d]
				deps = append(deps, results[at[d]])
			}
			for _, d := range deps {
				if (d.State != StateCompleted || d.Incomplete) && !t.RunAnyway {
					results[i] = FanResult{ID: t.ID, State: StateSkipped,
						Skipped: fmt.Sprintf("task %s it depends on ended %s", d.ID, d.State)}
					return
				}
			}
			results[i] = tr.fanTask(ctx, parent, t, deps)
		}()
	}
	wg.Wait()
	return results
}

// fanTask runs one task of a fan-out as a foreground child.
func (tr *tree) fanTask(ctx context.Context, parent *node, t FanTask, deps []FanResult) FanResult {
	var b strings.Builder
	if c := strings.TrimSpace(t.Context); c != "" {
		b.WriteString("Context:\n" + c + "\n\n")
	}
	if len(deps) > 0 {
		b.WriteString("Reports of the tasks this one builds on:\n\n" + MergeConcat(deps) + "\n\n")
	}
	b.WriteString(t.Task)
	child, msgs, err := tr.prepare(ctx, parent, spawnInput{Type: t.Type, Task: b.String(), Description: t.ID,
		tools: t.Tools, timeout: t.Timeout, sub: t.ID})
	if err != nil {
		return FanResult{ID: t.ID, State: StateFailed, Report: err.Error()}
	}
	r := tr.runChild(ctx, child, msgs)
	res := FanResult{ID: t.ID, State: r.State, Report: r.Report, Incomplete: r.Incomplete, Artifacts: r.Artifacts}
	if r.Failed() && r.Error != "" {
		res.Report = strings.TrimSpace(r.Error + "\n" + r.Report)
	}
	return res
}
