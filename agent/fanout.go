package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

// FanTask is one task of a fan-out: a subagent type and its task, with
// the tasks it depends on (whose reports it receives) and its own limits.
type FanTask struct {
	ID      string `json:"id"`
	Type    string `json:"subagent_type"`
	Task    string `json:"task"`
	Context string `json:"context,omitempty"` // a snippet put before the task
	// Tools narrows the type's allowlist for this task; none: the type's.
	Tools []string `json:"tools,omitempty"`
	// Isolation, when set, fences the task more tightly than its type
	// (a looser one is refused).
	Isolation agentdef.Isolation `json:"isolation,omitempty"`
	Timeout   time.Duration      `json:"-"` // hard; the soft one is at SoftTimeoutShare
	DependsOn []string           `json:"depends_on,omitempty"`
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
		case strings.HasPrefix(t.ID, reservedPrefix):
			errs = append(errs, fmt.Errorf("task id %q: ids starting with %q are deputy's own (its merge step)", t.ID, reservedPrefix))
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
	ID   string `json:"id"`
	Type string `json:"subagent_type,omitempty"`
	// State is the relay's of the child that ran the task (failed too for
	// a task whose child could not be spawned); empty for a skipped task,
	// which had no child, so no state.
	State  instance.State `json:"state,omitempty"`
	Report string         `json:"report"`
	// Skipped says why a task did not run (a dependency that did not
	// complete); set exactly when it did not.
	Skipped    string   `json:"skipped,omitempty"`
	Incomplete bool     `json:"incomplete,omitempty"`
	Artifacts  []string `json:"artifacts,omitempty"`
	// Instance is the child that ran it (its transcript), Usage what it
	// and its own children spent, Elapsed how long it ran.
	Instance string        `json:"instance,omitempty"`
	Usage    llm.Usage     `json:"usage"`
	Elapsed  time.Duration `json:"elapsed_ns,omitempty"`
}

// Completed reports whether the task's child completed its task, not
// partially: what a task that depends on it needs, and what a vote counts.
func (r FanResult) Completed() bool { return r.State == instance.Completed && !r.Incomplete }

// outcome is how the task ended, for a model to read: its state, or
// "skipped".
func (r FanResult) outcome() string {
	if r.Skipped != "" {
		return "skipped"
	}
	return string(r.State)
}

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
		case r.Skipped != "":
			b.WriteString(" (skipped: " + r.Skipped + ")")
		case !r.Completed():
			b.WriteString(" (" + r.outcome())
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
	// Judge is the instance that picked Answer when a judge decided (its
	// reasons in JudgeReport); Votes then counts the answers equal to it.
	Judge       string `json:"judge,omitempty"`
	JudgeReport string `json:"judge_report,omitempty"`
}

// String says how the vote ended, in a line.
func (v Vote) String() string {
	switch {
	case v.Judge != "" && v.Answer != "":
		return fmt.Sprintf("vote: judge %s picked %q (%d of %d answers agree)", v.Judge, v.Answer, v.Votes, v.Counted)
	case v.Judge != "":
		return fmt.Sprintf("vote: judge %s picked no answer (%s)", v.Judge, agentdef.OneLine(v.JudgeReport, 200))
	case v.Answer != "":
		return fmt.Sprintf("vote: %q with %d of %d answers", v.Answer, v.Votes, v.Counted)
	case len(v.Tie) > 0:
		return fmt.Sprintf("vote: a tie at %d of %d answers between %q", v.Votes, v.Counted, v.Tie)
	}
	return "vote: no task completed with an answer"
}

// normalized is an answer as votes compare it: trimmed, case-folded,
// whitespace collapsed.
func normalized(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

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
	for _, r := range voters(results) {
		key := normalized(r.Report)
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

// Merge strategies of fan_out.
const (
	MergeConcatName    = "concat"
	MergeSummarizeName = "summarize"
	MergeVoteName      = "vote"
)

// reservedPrefix starts the ids of deputy's own tasks in a fan-out (its
// merge step), so no task of the plan can take their child's name.
const reservedPrefix = "@"

var fanOutSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"tasks":{"type":"array","minItems":1,"items":{"type":"object","properties":{` +
	`"id":{"type":"string","minLength":1,"description":"A short name, unique in this call, that depends_on refers to."},` +
	`"subagent_type":{"type":"string","description":"One of the types spawn_subagent lists."},` +
	`"task":{"type":"string","minLength":1,"description":"The complete task, as for spawn_subagent."},` +
	`"context":{"type":"string","description":"Facts the subagent needs, put before the task."},` +
	`"tools":{"type":"array","items":{"type":"string"},"description":"Only these of the type's tools."},` +
	`"isolation":{"type":"string","enum":["none","sandbox","container"],"description":"Run it fenced: sandbox or container (default: the type's)."},` +
	`"timeout_seconds":{"type":"number","exclusiveMinimum":0,"description":"Stop it after this long; its partial report comes back marked incomplete."},` +
	`"depends_on":{"type":"array","items":{"type":"string"},"description":"Ids of tasks that must end first; their reports are given to this one."},` +
	`"run_anyway":{"type":"boolean","description":"Run even if a task it depends on did not complete."}` +
	`},"required":["id","subagent_type","task"],"additionalProperties":false}},` +
	`"merge":{"type":"string","enum":["concat","summarize","vote"],"description":"concat (default): every report under its task's heading. summarize: one more model call merges the reports into one within limit characters. vote: the majority answer among the completed tasks, ties reported; with judge, that subagent type picks the answer instead."},` +
	`"limit":{"type":"integer","minimum":200,"description":"summarize: the merged report's size in characters (default 3000)."},` +
	`"judge":{"type":"string","description":"vote: a subagent type that reads the answers and picks one."},` +
	`"format":{"type":"string","enum":["text","json"],"description":"text (default), or json: every task's result as data."}` +
	`},"required":["tasks"],"additionalProperties":false}`)

// FanOutInput is fan_out's input: the library's FanOut sends the same.
type FanOutInput struct {
	Tasks  []FanTaskInput `json:"tasks"`
	Merge  string         `json:"merge,omitempty"`
	Limit  int            `json:"limit,omitempty"`
	Judge  string         `json:"judge,omitempty"`
	Format string         `json:"format,omitempty"`
}

// FanTaskInput is a FanTask as the tool's JSON has it: its timeout in
// seconds.
type FanTaskInput struct {
	FanTask
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// FanOutput is fan_out's result with format json.
type FanOutput struct {
	Merge string `json:"merge"`
	// Merged is the merge's text: every report (concat), the summary, or
	// the vote's outcome.
	Merged string `json:"merged"`
	Vote   *Vote  `json:"vote,omitempty"`
	// Merger is the child that summarized or judged, when one did.
	Merger  *FanResult  `json:"merger,omitempty"`
	Results []FanResult `json:"results"`
}

// fanOutTool is fan_out: one call runs a planned set of subagents, each
// as spawn_subagent would (same caps, depth and budgets), each task once
// the tasks it depends on have ended, and merges their reports.
type fanOutTool struct{ tree *tree }

func (f fanOutTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: agentdef.FanOutTool, InputSchema: fanOutSchema, Description: "Run several subagents as one " +
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
	parent, in, err := callInput[FanOutInput](ctx, agentdef.FanOutTool, raw)
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
	if in.Judge != "" && in.Merge != MergeVoteName {
		return "", errors.New("fan_out refused: judge goes with merge vote")
	}
	if in.Judge != "" {
		if _, ok := f.tree.catalog.Lookup(in.Judge); !ok {
			return "", fmt.Errorf("fan_out refused: judge %q is not a subagent type (spawn_subagent lists them)", in.Judge)
		}
	}
	out := f.tree.merge(ctx, parent, in, f.tree.fanOut(ctx, parent, tasks))
	if in.Format == "json" {
		b, err := json.Marshal(out)
		return string(b), err
	}
	return out.text(), nil
}

// merge merges a fan-out's results as in asks.
func (tr *tree) merge(ctx context.Context, parent *node, in FanOutInput, results []FanResult) FanOutput {
	out := FanOutput{Merge: cmp.Or(in.Merge, MergeConcatName), Results: results}
	switch out.Merge {
	case MergeSummarizeName:
		limit := cmp.Or(in.Limit, agentdef.DefaultReportCap)
		m := tr.fanChild(ctx, parent, reservedPrefix+"summary", spawnInput{def: summarizer(limit), SpawnInput: SpawnInput{Task: fmt.Sprintf(
			summarizeTask, len(results), limit, MergeConcat(results))}})
		out.Merger = &m
		if m.Completed() {
			out.Merged, _ = CapReport(m.Report, limit)
		}
	case MergeVoteName:
		v := MergeVote(results)
		if in.Judge != "" && v.Counted > 0 {
			m := tr.fanChild(ctx, parent, reservedPrefix+"judge", spawnInput{SpawnInput: SpawnInput{Type: in.Judge, Task: judgeTask(results)}})
			out.Merger = &m
			v = judged(v, m, results)
		}
		out.Vote = &v
		out.Merged = v.String()
	default:
		out.Merged = MergeConcat(results)
	}
	return out
}

// text is fan_out's result for a model: a summary with a line per task
// (where each one's whole report is), a vote's outcome then every
// report, or every report.
func (o FanOutput) text() string {
	var b strings.Builder
	switch {
	case o.Merge == MergeSummarizeName && o.Merged != "":
		b.WriteString(o.Merged + "\n\nTasks:")
		for _, r := range o.Results {
			fmt.Fprintf(&b, "\n- %s: %s", r.ID, r.outcome())
			if r.Instance != "" {
				b.WriteString(" (" + r.Instance + ")")
			}
		}
		return b.String()
	case o.Merge == MergeSummarizeName:
		// The summary failed: the reports themselves, so nothing is lost.
		fmt.Fprintf(&b, "summarize: the merge did not complete (%s: %s); the reports follow.\n\n", o.Merger.outcome(),
			agentdef.OneLine(o.Merger.Report, 200))
	case o.Vote != nil:
		b.WriteString(o.Merged + "\n\n")
	}
	return b.String() + MergeConcat(o.Results)
}

// summarizer is the definition of the summarize merge's child: no tools,
// one turn, its report bounded by the limit.
func summarizer(limit int) *agentdef.Definition {
	return &agentdef.Definition{Name: "fan-out-summary", Description: "Merges the reports of a fan-out into one.",
		SystemPrompt: "You merge the reports of several subagents into one report. Keep every conclusion and " +
			"fact they found, say where they disagree, and drop repetition. Reply with the merged report only.",
		Tools: []string{}, MaxTurns: 1, ReportCap: limit, Mode: agentdef.ModeIsolated, Isolation: agentdef.IsolationNone,
		Source: agentdef.Source{Level: agentdef.LevelVolatile}}
}

const summarizeTask = "Merge these %d reports into one report of at most %d characters.\n\n%s"

// judgeTask asks a judge to pick one of the completed tasks' answers.
func judgeTask(results []FanResult) string {
	var b strings.Builder
	b.WriteString("Several subagents answered the same question. Pick the best answer. Reply with its number " +
		"alone on the first line, then, briefly, why.\n")
	for i, r := range voters(results) {
		fmt.Fprintf(&b, "\nAnswer %d:\n%s\n", i+1, strings.TrimSpace(r.Report))
	}
	return b.String()
}

// voters are the results a vote counts: completed, with an answer.
func voters(results []FanResult) []FanResult {
	var out []FanResult
	for _, r := range results {
		if r.Completed() && normalized(r.Report) != "" {
			out = append(out, r)
		}
	}
	return out
}

var leadingNumber = regexp.MustCompile(`^\D{0,20}?(\d+)`)

// judged is the vote as the judge decided it: the answer whose number it
// gave first, or, when it gave none in range, no answer (the tally stays).
func judged(v Vote, m FanResult, results []FanResult) Vote {
	v.Judge = m.Instance
	v.JudgeReport = m.Report
	vs := voters(results)
	match := leadingNumber.FindStringSubmatch(strings.TrimSpace(m.Report))
	if m.State != instance.Completed || match == nil {
		return v
	}
	n, err := strconv.Atoi(match[1])
	if err != nil || n < 1 || n > len(vs) {
		return v
	}
	pick := normalized(vs[n-1].Report)
	v.Answer, v.Tie, v.Votes = strings.TrimSpace(vs[n-1].Report), nil, 0
	for _, r := range vs {
		if normalized(r.Report) == pick {
			v.Votes++
		}
	}
	return v
}

// fanOut runs tasks (planned: no cycle, every dependency present) as
// children of parent, each when its dependencies have ended, and returns
// their results in task order. A task whose dependency did not complete
// is skipped, unless it runs anyway.
//
// The tasks that depend on none are prepared at once and listed together,
// in task order, before any starts, with one EventListed before their
// EventCreated: a store records them in one write rather than one per
// child. A task that depends on others is listed when they have ended,
// since their reports are part of its task.
func (tr *tree) fanOut(ctx context.Context, parent *node, tasks []FanTask) []FanResult {
	results := make([]FanResult, len(tasks))
	ended := make(map[string]chan struct{}, len(tasks))
	at := make(map[string]int, len(tasks))
	for i, t := range tasks {
		ended[t.ID], at[t.ID] = make(chan struct{}), i
	}
	ready := tr.listReady(ctx, parent, tasks)
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ended[t.ID])
			if r := ready[i]; r != nil {
				results[i] = tr.fanListed(ctx, r)
				return
			}
			var deps []FanResult
			for _, d := range t.DependsOn {
				<-ended[d]
				deps = append(deps, results[at[d]])
			}
			for _, d := range deps {
				if !d.Completed() && !t.RunAnyway {
					results[i] = FanResult{ID: t.ID, Type: t.Type,
						Skipped: fmt.Sprintf("task %s it depends on ended %s", d.ID, d.outcome())}
					return
				}
			}
			results[i] = tr.fanTask(ctx, parent, t, deps)
		}()
	}
	wg.Wait()
	return results
}

// fanReady is a task of a fan-out prepared at its call: listed (n), or
// refused (res says why).
type fanReady struct {
	res       FanResult
	parent, n *node
	msgs      []llm.Message
	err       error
}

// listReady prepares the tasks that depend on none, concurrently (a
// child's MCP servers start as it is prepared), then lists those that
// could be, in task order, announcing them together (EventListed) before
// one by one (EventCreated). It returns them by task index, nil for the
// tasks that wait for others.
func (tr *tree) listReady(ctx context.Context, parent *node, tasks []FanTask) []*fanReady {
	ready := make([]*fanReady, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		if len(t.DependsOn) > 0 {
			continue
		}
		r := &fanReady{}
		ready[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := fanInput(t, nil)
			r.res = fanResult(t.ID, in)
			var c *node
			if c, r.msgs, r.err = tr.prepare(ctx, parent, in); r.err == nil {
				r.n = c
			}
		}()
	}
	wg.Wait()
	var listed []Event
	for _, r := range ready {
		if r == nil || r.err != nil {
			continue
		}
		r.parent, r.n = tr.place(ctx, r.n)
		listed = append(listed, tr.stamp(r.n, Event{Kind: EventCreated, Spawned: r.n.spawned(r.msgs)}))
	}
	if len(listed) > 1 {
		tr.emit(parent, Event{Kind: EventListed, Listed: listed})
	}
	for _, e := range listed {
		if tr.r.OnEvent != nil {
			tr.r.OnEvent(e)
		}
	}
	return ready
}

// fanListed runs a task listed at the fan-out's call (listReady).
func (tr *tree) fanListed(ctx context.Context, r *fanReady) FanResult {
	res := r.res
	if r.err != nil {
		res.State, res.Report = instance.Failed, r.err.Error()
		return res
	}
	return ranAs(res, tr.runListed(ctx, r.parent, r.n, r.msgs))
}

// fanTask runs one task of a fan-out as a foreground child.
func (tr *tree) fanTask(ctx context.Context, parent *node, t FanTask, deps []FanResult) FanResult {
	return tr.fanChild(ctx, parent, t.ID, fanInput(t, deps))
}

// fanInput is the spawn of task t, given the reports of the tasks it
// depends on.
func fanInput(t FanTask, deps []FanResult) spawnInput {
	var b strings.Builder
	if c := strings.TrimSpace(t.Context); c != "" {
		b.WriteString("Context:\n" + c + "\n\n")
	}
	if len(deps) > 0 {
		b.WriteString("Reports of the tasks this one builds on:\n\n" + MergeConcat(deps) + "\n\n")
	}
	b.WriteString(t.Task)
	in := spawnInput{SpawnInput: SpawnInput{Type: t.Type, Task: b.String()}, tools: t.Tools, timeout: t.Timeout,
		isolation: t.Isolation}
	in.Description, in.sub = t.ID, t.ID
	return in
}

// fanResult is the start of the result of a fan-out's child id.
func fanResult(id string, in spawnInput) FanResult {
	res := FanResult{ID: id, Type: in.Type}
	if in.def != nil {
		res.Type = in.def.Name
	}
	return res
}

// fanChild runs one child of a fan-out (a task, or the merge's) in the
// foreground, named after the call and id.
func (tr *tree) fanChild(ctx context.Context, parent *node, id string, in spawnInput) FanResult {
	in.Description, in.sub = id, id
	res := fanResult(id, in)
	child, msgs, err := tr.prepare(ctx, parent, in)
	if err != nil {
		res.State, res.Report = instance.Failed, err.Error()
		return res
	}
	return ranAs(res, tr.runChild(ctx, child, msgs))
}

// ranAs is res filled in with how its child's run ended (r).
func ranAs(res FanResult, r Relay) FanResult {
	res.State, res.Report, res.Incomplete, res.Artifacts = r.State, r.Report, r.Incomplete, r.Artifacts
	res.Instance, res.Usage, res.Elapsed = r.ID, r.Usage, r.Duration
	if r.Failed() && r.Error != "" {
		res.Report = strings.TrimSpace(r.Error + "\n" + r.Report)
	}
	return res
}

// PlannerModel is the model spec of a program's fan-out root: instead of
// asking a provider, it calls fan_out with the plan its task holds, then
// answers with the tool's result. A program's fan-out thus runs as a
// model's would, in a durable instance that any deputy process on the
// database (deputy worker included) can resume.
const PlannerModel = "deputy:fan-out"

// Planner is PlannerModel's model.
type Planner struct{}

// Generate implements llm.Model.
func (Planner) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("planner: no task")
	}
	for _, b := range req.Messages[len(req.Messages)-1].Content {
		if b.Type == llm.TypeToolResult {
			return &llm.Response{Content: []llm.Block{llm.Text(b.Text)}, StopReason: llm.StopEndTurn}, nil
		}
	}
	plan := req.Messages[0].Text()
	return &llm.Response{StopReason: llm.StopToolUse, Content: []llm.Block{
		llm.ToolUse("fan_out_1", agentdef.FanOutTool, json.RawMessage(plan)),
	}}, nil
}
