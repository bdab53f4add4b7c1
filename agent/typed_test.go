package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// recording is a model that keeps every request it is sent, and whether
// it was given a stream callback with it.
type recording struct {
	llm.Model
	mu       sync.Mutex
	reqs     []llm.Request
	streamed []bool
}

func (r *recording) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, *req)
	r.streamed = append(r.streamed, stream != nil)
	r.mu.Unlock()
	return r.Model.Generate(ctx, req, stream)
}

func (r *recording) requests() []llm.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]llm.Request(nil), r.reqs...)
}

// toolsOffered lists the tool names of each request whose system prompt
// contains system.
func (r *recording) toolsOffered(system string) [][]string {
	var out [][]string
	for _, q := range r.requests() {
		if strings.Contains(q.System, system) {
			out = append(out, toolNames(q.Tools))
		}
	}
	return out
}

// scribble is a tool that changes the workspace: a type's read-only
// allowlist must leave it out.
type scribble struct{}

func (scribble) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "scribble", Description: "Writes.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (scribble) ReadOnly() bool                                       { return false }
func (scribble) Run(context.Context, json.RawMessage) (string, error) { return "written", nil }

const typedScenario = `
rules:
  - match: {last_user: "Rewrite it within"}
    text: "Short: the probe answered."
  - match: {system: "read-only explorer"}
    text: "child looked"
  - match: {turn: 1}
    tool_calls: [{name: probe, input: {}}]
  - match: {turn: 2}
    text: "{{lorem 500}}"
`

// typedRunner is a runner whose catalog has the type lookout, whose haiku
// tier is a second scripted model (recorded), and whose task's own model
// is recorded too.
func typedRunner(t *testing.T, scenario string) (*agent.Runner, agent.Task, *recording, *recording) {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	own := &recording{Model: fake.NewModel(s, fake.WithoutLatency())}
	small := &recording{Model: fake.NewModel(s, fake.WithoutLatency())}
	cat, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err = cat.With(&agentdef.Definition{Name: "lookout", Description: "Looks out.", SystemPrompt: "You look out.",
		Tools: []string{"probe", agentdef.SpawnTool}, Model: agentdef.TierHaiku, ToolChoice: "probe", ReportCap: 100,
		Skills: []string{"binoculars"}, MaxTurns: 5},
		&agentdef.Definition{Name: "boxed", Description: "Fenced.", SystemPrompt: "x", Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &agent.Runner{
		Catalog: cat,
		Config:  &agentdef.Config{Tiers: map[string]string{agentdef.TierHaiku: "fake:small"}},
		Skills:  map[string]*agentdef.Skill{"binoculars": {Name: "binoculars", Description: "Seeing far.", Instructions: "Look."}},
		Models: func(spec string) (llm.Model, error) {
			if spec != "fake:small" {
				t.Errorf("opened %s", spec)
			}
			return small, nil
		},
	}
	task := agent.Task{Task: "watch the road", System: "a plain root's prompt", Model: own, ModelName: "fake",
		Tools: tool.MustSet(probe{where: "the workspace"}, scribble{}), Type: "lookout"}
	return r, task, own, small
}

// A root of a type runs exactly as a spawned isolated child of it: the
// type's prompt with the report bound and its skills, its allowlist over
// the task's tools, spawning because the allowlist names it, its tool
// choice, its tier's model, and a report over its cap shortened by one
// more call.
func TestRootRunsAsItsType(t *testing.T) {
	t.Parallel()
	r, task, own, small := typedRunner(t, typedScenario)
	o, err := r.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	root := o.Instances[0]
	if root.Type != "lookout" || root.Model != "fake:small" || root.Depth != 0 || root.Parent != "" || root.Mode != "" {
		t.Fatalf("root %+v", root)
	}
	if len(own.requests()) != 0 {
		t.Errorf("the task's model was called; the type's tier names another")
	}
	reqs := small.requests()
	if len(reqs) != 3 { // two turns, then the shorter report
		t.Fatalf("%d requests", len(reqs))
	}
	first := reqs[0]
	if !strings.HasPrefix(first.System, "You look out.") || !strings.Contains(first.System, "Keep it within 100 characters") ||
		!strings.Contains(first.System, "- binoculars: Seeing far.") || !strings.Contains(first.System, agent.DelegationGuidance) ||
		strings.Contains(first.System, "a plain root's prompt") {
		t.Errorf("system prompt:\n%s", first.System)
	}
	// No fan_out: the allowlist names spawn_subagent, which does not grant it.
	if got := strings.Join(toolNames(first.Tools), ","); got != "probe,spawn_subagent,skill" {
		t.Errorf("tools %s", got)
	}
	if first.ToolChoice != (llm.ToolChoice{Type: "tool", Name: "probe"}) || first.Model != "small" {
		t.Errorf("tool choice %+v, model %q", first.ToolChoice, first.Model)
	}
	if !strings.Contains(reqs[2].Messages[len(reqs[2].Messages)-1].Text(), "Rewrite it within 100") {
		t.Errorf("the third call is not the report's")
	}
	if o.Report != "Short: the probe answered." || len([]rune(o.Result.Answer)) != 500 || root.Report != o.Report {
		t.Errorf("report %q (answer %d chars, %q recorded)", o.Report, len([]rune(o.Result.Answer)), root.Report)
	}
}

// The task's limits win over the type's; those it leaves at zero are the
// type's, with a child's soft timeout.
func TestTypeLimits(t *testing.T) {
	t.Parallel()
	def := &agentdef.Definition{MaxTurns: 5, Budgets: agentdef.Budgets{TotalTokens: 900, ToolCalls: 4, WallTime: 10 * time.Second,
		OutputTokensPerCall: 300}}
	got := agent.TypeLimits(def, loop.Limits{MaxTurns: 2, ToolOutputChars: 7})
	want := loop.Limits{MaxTurns: 2, MaxTotalTokens: 900, MaxToolCalls: 4, WallTime: 10 * time.Second, SoftWallTime: 8 * time.Second,
		MaxOutputTokens: 300, ToolOutputChars: 7}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	got = agent.TypeLimits(def, loop.Limits{WallTime: time.Second})
	if got.WallTime != time.Second || got.SoftWallTime != 800*time.Millisecond {
		t.Errorf("a task's wall time: %+v", got)
	}
}

// The type's turn limit stops the root, as it would a child of it.
func TestRootOfATypeStopsAtItsTurnLimit(t *testing.T) {
	t.Parallel()
	r, task, _, small := typedRunner(t, `
rules:
  - tool_calls: [{name: probe, input: {}}]
`)
	o, err := r.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if root := o.Instances[0]; root.Turns != 5 || root.StopReason != string(loop.StopMaxTurns) || !root.Incomplete {
		t.Fatalf("root %+v", root)
	}
	if len(small.requests()) != 5 {
		t.Errorf("%d requests", len(small.requests()))
	}
}

// A type that names no spawn_subagent gives its root no spawning, whatever
// MaxDepth allows; a recorded snapshot (Task.Definition) wins over the
// catalog; the task's model runs a type that inherits one.
func TestRootOfATypeWithoutSpawnRights(t *testing.T) {
	t.Parallel()
	r, task, own, _ := typedRunner(t, `
rules:
  - text: "plain answer"
`)
	r.MaxDepth = 3
	task.Definition = &agentdef.Definition{Name: "lookout", Description: "Recorded.", SystemPrompt: "You are the recorded lookout.",
		Tools: []string{"probe", "scribble"}}
	o, err := r.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	reqs := own.requests()
	if len(reqs) != 1 || o.Instances[0].Model != "fake" || o.Report != "plain answer" {
		t.Fatalf("%d requests to the task's model; root %+v", len(reqs), o.Instances[0])
	}
	if got := strings.Join(toolNames(reqs[0].Tools), ","); got != "probe,scribble" {
		t.Errorf("tools %s", got)
	}
	if !strings.HasPrefix(reqs[0].System, "You are the recorded lookout.") || strings.Contains(reqs[0].System, agent.DelegationGuidance) {
		t.Errorf("system %q", reqs[0].System)
	}
}

// Task.Offer narrows what a root of a type is offered: the prompt lists
// the skills and ends with the delegation guidance only when the skill
// and spawn tools are offered. Naming a tool the type does not grant, or
// leaving out the one its tool choice names, is an error before any call.
func TestOfferNarrowsARootOfAType(t *testing.T) {
	t.Parallel()
	r, task, _, small := typedRunner(t, `
rules:
  - text: "plain answer"
`)
	task.Offer = []string{"probe"}
	if _, err := r.Run(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	reqs := small.requests()
	if got := toolNames(reqs[0].Tools); len(got) != 1 || got[0] != "probe" {
		t.Errorf("tools %v", got)
	}
	if s := reqs[0].System; strings.Contains(s, agent.DelegationGuidance) || strings.Contains(s, "binoculars") ||
		!strings.HasPrefix(s, "You look out.") {
		t.Errorf("system %q", s)
	}
	for offer, want := range map[string]string{
		"scribble":           "scribble: subagent type lookout does not grant it",
		agentdef.FanOutTool:  "fan_out: subagent type lookout does not grant it",
		agentdef.AskTool:     "ask_parent needs Runner.Questions",
		agentdef.SkillTool:   "must call probe (its tool choice), which Task.Offer leaves out",
		agentdef.SpawnTool:   "must call probe",
		agentdef.AnswerTool:  "need a managed runtime",
		"probe,nope":         "nope: it is neither a tool of Task.Tools",
		"probe,skill,nobody": "nobody: it is neither",
	} {
		task.Offer = strings.Split(offer, ",")
		if _, err := r.Run(context.Background(), task); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Offer %s: %v, want %q", offer, err, want)
		}
	}
	if len(small.requests()) != 1 {
		t.Errorf("a refused root ran")
	}
}

// An unknown type and a fenced one are refused before anything runs.
func TestRootTypeRefusals(t *testing.T) {
	t.Parallel()
	r, task, own, _ := typedRunner(t, typedScenario)
	task.Type = "nobody"
	if _, err := r.Run(context.Background(), task); err == nil || !strings.Contains(err.Error(), `unknown subagent type "nobody"`) ||
		!strings.Contains(err.Error(), "explorer, fixer, general-purpose, lookout") {
		t.Errorf("unknown type: %v", err)
	}
	task.Type = "boxed"
	if _, err := r.Run(context.Background(), task); err == nil || !strings.Contains(err.Error(), "asks for a git worktree") ||
		!strings.Contains(err.Error(), "refused rather than run unfenced") {
		t.Errorf("fenced type: %v", err)
	}
	if err := agent.CheckRoot(&agentdef.Definition{Name: "s", Isolation: agentdef.IsolationSandbox}); err == nil ||
		!strings.Contains(err.Error(), "isolation sandbox") {
		t.Errorf("sandbox: %v", err)
	}
	if len(own.requests()) != 0 {
		t.Error("a refused root ran")
	}
}

// Describe is the catalog as the spawn tool lists it.
func TestDescribeListsTheCatalog(t *testing.T) {
	t.Parallel()
	got := agentdef.Describe(agentdef.Builtins())
	for _, want := range []string{"- explorer: Fast read-only search", "- fixer: Makes a focused change", " [mode: fork]",
		"- reviewer: Independent read-only review", "[mode: isolated, fixed]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != len(agentdef.Builtins())-1 {
		t.Errorf("one line per type:\n%q", got)
	}
}
