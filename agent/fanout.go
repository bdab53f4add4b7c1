package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
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
