package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/tool"
)

// runtime stands in for deputy's managed runtime: a ChildRunner running
// each child in place, a Questions taking questions, and a Manager whose
// methods these tests never reach (its embedded nil interface would fail
// loudly if one did).
type runtime struct {
	agent.Manager
	mu    sync.Mutex
	asked []string
}

func (*runtime) RunChild(ctx context.Context, _ string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) (agent.ChildEnd, error) {
	return work(ctx, agent.ChildEnv{}), nil
}

func (*runtime) StartChild(context.Context, string, func(context.Context, agent.ChildEnv) agent.ChildEnd) error {
	return errors.New("no background children in this test")
}

func (r *runtime) Ask(_ context.Context, id, _, question string) error {
	r.mu.Lock()
	r.asked = append(r.asked, id+": "+question)
	r.mu.Unlock()
	return nil
}

func managedRunner(rt *runtime) *agent.Runner {
	return &agent.Runner{Children: rt, Manager: rt, Questions: rt}
}

func nop(name string) tool.Tool {
	return fnTool{name: name, run: func(context.Context) (string, error) { return name + " ran", nil }}
}

// recorded runs scenario on a recorded scripted model.
func recorded(t *testing.T, scenario string) *recording {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return &recording{Model: fake.NewModel(s, fake.WithoutLatency())}
}

const allowlistScenario = `
rules:
  - match: {system: "^You are a child"}
    text: "ok"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: lister, task: "t"}}
      - {name: spawn_subagent, input: {subagent_type: inheritor, task: "t"}}
      - {name: spawn_subagent, input: {subagent_type: denier, task: "t"}}
      - {name: spawn_subagent, input: {subagent_type: spawner, task: "t"}}
      - {name: spawn_subagent, input: {subagent_type: fanner, task: "t"}}
  - text: "done"
`

// A definition's Tools means what it says under a managed runtime: a list
// is exactly its tools (ask_parent only when listed), an absent one is
// everything held and ask_parent; spawn_subagent brings the subagent_*
// tools, fan_out comes only when listed itself. Runner.AskParent offers
// ask_parent to every child but one whose deny list names it.
func TestAllowlistMeansWhatItSays(t *testing.T) {
	t.Parallel()
	// subagent_approve only where permissions are enforced (none here).
	manage := slices.DeleteFunc(agentdef.ManageTools(), func(n string) bool { return n == agentdef.ApproveTool })
	for _, c := range []struct {
		askParent bool
		want      map[string][]string
	}{
		{false, map[string][]string{
			"lister":    {"noop"},
			"inheritor": {"noop", "extra", agentdef.AskTool},
			"denier":    {"noop", "extra"},
			"spawner":   append([]string{"noop", agentdef.SpawnTool}, manage...),
			"fanner":    {agentdef.FanOutTool},
		}},
		{true, map[string][]string{
			"lister":    {"noop", agentdef.AskTool},
			"inheritor": {"noop", "extra", agentdef.AskTool},
			"denier":    {"noop", "extra"},
			"spawner":   append([]string{"noop", agentdef.SpawnTool}, append(manage, agentdef.AskTool)...),
			"fanner":    {agentdef.FanOutTool, agentdef.AskTool},
		}},
	} {
		model := recorded(t, allowlistScenario)
		r := managedRunner(&runtime{})
		r.AskParent, r.MaxDepth = c.askParent, 2
		def := func(name string, tools []string, denied ...string) *agentdef.Definition {
			return &agentdef.Definition{Name: name, Description: name, SystemPrompt: "You are a child: " + name + ".",
				Tools: tools, DisallowedTools: denied}
		}
		task := agent.Task{Task: "go", System: "You are the root.", Model: model, ModelName: "fake", Tools: tool.MustSet(nop("noop"), nop("extra")),
			Volatile: []*agentdef.Definition{
				def("lister", []string{"noop"}),
				def("inheritor", nil),
				def("denier", nil, agentdef.AskTool),
				def("spawner", []string{"noop", agentdef.SpawnTool}),
				def("fanner", []string{agentdef.FanOutTool}),
			}}
		o, err := r.Run(context.Background(), task)
		if err != nil || len(o.Instances) != 6 {
			t.Fatalf("AskParent %v: %v, %d instances", c.askParent, err, len(o.Instances))
		}
		for name, want := range c.want {
			got := model.toolsOffered("You are a child: " + name + ".")
			if len(got) != 1 || !slices.Equal(got[0], want) {
				t.Errorf("AskParent %v: %s was offered %v, want %v", c.askParent, name, got, want)
			}
		}
		root := model.toolsOffered("You are the root.")
		want := append(append([]string{"noop", "extra", agentdef.SpawnTool, agentdef.FanOutTool}, manage...), agentdef.AskTool)
		if len(root) == 0 || !slices.Equal(root[0], want) {
			t.Errorf("AskParent %v: the root was offered %v, want %v", c.askParent, root, want)
		}
	}
}

const offerScenario = `
rules:
  - match: {system: "You use alpha"}
    tool_calls: [{name: alpha, input: {}}]
    times: 1
  - match: {system: "You use beta"}
    tool_calls: [{name: beta, input: {}}]
    times: 1
  - match: {system: "You use"}
    text: "{{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: alpha-user, task: "use alpha"}}
      - {name: spawn_subagent, input: {subagent_type: beta-user, task: "use beta"}}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}} | {{index .ToolResults 1}}"
`

// A root offered only spawn_subagent still holds its tools: each child
// draws the one its type allows from them. The root's model sees only
// the spawn tool, each child's only its own tool.
func TestOfferOnlySpawning(t *testing.T) {
	t.Parallel()
	model := recorded(t, offerScenario)
	r := managedRunner(&runtime{})
	task := agent.Task{Task: "go", System: "You are the root.", Model: model, ModelName: "fake",
		Tools: tool.MustSet(nop("alpha"), nop("beta")), Offer: []string{agentdef.SpawnTool},
		Volatile: []*agentdef.Definition{
			{Name: "alpha-user", Description: "a", SystemPrompt: "You use alpha.", Tools: []string{"alpha"}},
			{Name: "beta-user", Description: "b", SystemPrompt: "You use beta.", Tools: []string{"beta"}},
		}}
	o, err := r.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Result.Answer, "alpha ran") || !strings.Contains(o.Result.Answer, "beta ran") {
		t.Fatalf("answer %q", o.Result.Answer)
	}
	for system, want := range map[string]string{"You are the root.": agentdef.SpawnTool, "You use alpha.": "alpha", "You use beta.": "beta"} {
		got := model.toolsOffered(system)
		if len(got) != 2 {
			t.Errorf("%q: %d requests", system, len(got))
		}
		for _, names := range got {
			if !slices.Equal(names, []string{want}) {
				t.Errorf("%q was offered %v, want only %s", system, names, want)
			}
		}
	}
	// Offered spawning, the root gets the delegation guidance.
	if reqs := model.requests(); !strings.Contains(reqs[0].System, agent.DelegationGuidance) {
		t.Errorf("root system %q", reqs[0].System)
	}
}

// The task alias is offered only when listed (with spawn_subagent); an
// empty Offer offers nothing, though the root still holds its tools.
func TestOfferTheTaskAliasAndNothing(t *testing.T) {
	t.Parallel()
	model := recorded(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "found"
  - match: {turn: 1}
    tool_calls: [{name: task, input: {subagent_type: explorer, task: "look"}}]
  - text: "{{index .ToolResults 0}}"
`)
	r := &agent.Runner{}
	task := agent.Task{Task: "go", System: "root", Model: model, ModelName: "fake", Tools: tool.MustSet(nop("noop")),
		Offer: []string{"task", agentdef.SpawnTool}}
	o, err := r.Run(context.Background(), task)
	if err != nil || len(o.Instances) != 2 || !strings.Contains(o.Result.Answer, "found") {
		t.Fatalf("%v: %+v", err, o)
	}
	if got := toolNames(model.requests()[0].Tools); !slices.Equal(got, []string{agentdef.SpawnTool}) {
		t.Errorf("offered %v", got)
	}

	model = recorded(t, `
rules:
  - match: {turn: 1}
    tool_calls: [{name: task, input: {subagent_type: explorer, task: "look"}}]
  - text: "{{index .ToolResults 0}}"
`)
	task.Model, task.Offer = model, []string{}
	o, err = r.Run(context.Background(), task)
	if err != nil || len(o.Instances) != 1 || !strings.Contains(o.Result.Answer, `unknown tool "task"`) {
		t.Fatalf("%v: %q", err, o.Result.Answer)
	}
	if reqs := model.requests(); len(reqs[0].Tools) != 0 || strings.Contains(reqs[0].System, agent.DelegationGuidance) {
		t.Errorf("offered %v, system %q", toolNames(reqs[0].Tools), reqs[0].System)
	}
}

// A name the root cannot be offered is an error of Run, saying why,
// before any model call: a program never gets less than it asked for.
func TestOfferRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		managed bool
		depth   int
		offer   []string
		want    []string
	}{
		{"unknown", false, 0, []string{"noop", "nope"}, []string{"nope: it is neither a tool of Task.Tools nor one of deputy's own"}},
		{"no questions", false, 0, []string{agentdef.AskTool}, []string{"ask_parent needs Runner.Questions"}},
		{"unmanaged", false, 0, []string{agentdef.WaitTool}, []string{"subagent_wait: the subagent_* tools need a managed runtime"}},
		{"no depth", true, -1, []string{agentdef.SpawnTool, agentdef.CancelTool},
			[]string{"spawn_subagent: Runner.MaxDepth allows no spawning", "subagent_cancel: Runner.MaxDepth allows no spawning"}},
		{"alias alone", false, 0, []string{"task"}, []string{"task is spawn_subagent's other name"}},
		{"alias without spawning", false, -1, []string{"task", agentdef.SpawnTool}, []string{"task is spawn_subagent's other name",
			"spawn_subagent: Runner.MaxDepth allows no spawning"}},
		{"skill", false, 0, []string{agentdef.SkillTool}, []string{"skill: a plain root has no skills"}},
	} {
		model := recorded(t, `rules: [{text: "ran"}]`)
		r := &agent.Runner{MaxDepth: c.depth}
		if c.managed {
			r = managedRunner(&runtime{})
			r.MaxDepth = c.depth
		}
		_, err := r.Run(context.Background(), agent.Task{Task: "go", Model: model, ModelName: "fake",
			Tools: tool.MustSet(nop("noop")), Offer: c.offer})
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q in it", c.name, err, w)
			}
		}
		if len(model.requests()) != 0 {
			t.Errorf("%s: the model was called", c.name)
		}
	}
}

// Runner.Stream reaches every instance's loop: the root's, an isolated
// child's and a fork child's model calls get a stream callback with it,
// and none without it (so a NonStreaming provider makes the plain call).
func TestStreamReachesEveryLoop(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		model := recorded(t, `
rules:
  - match: {last_user: "You are now a subagent of type forker"}
    text: "forked"
  - match: {system: "read-only explorer"}
    text: "explored"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look"}}
      - {name: spawn_subagent, input: {subagent_type: forker, task: "carry on"}}
  - text: "{{index .ToolResults 0}} {{index .ToolResults 1}}"
`)
		r := &agent.Runner{Stream: stream}
		o, err := r.Run(context.Background(), agent.Task{Task: "go", System: "root", Model: model, ModelName: "fake",
			Volatile: []*agentdef.Definition{{Name: "forker", Description: "f", Mode: agentdef.ModeFork, Tools: []string{}}}})
		if err != nil || !strings.Contains(o.Result.Answer, "explored") || !strings.Contains(o.Result.Answer, "forked") {
			t.Fatalf("stream %v: %v, %q", stream, err, o.Result.Answer)
		}
		model.mu.Lock()
		got := slices.Clone(model.streamed)
		model.mu.Unlock()
		if len(got) != 4 || slices.Contains(got, !stream) {
			t.Errorf("Stream %v: the calls were streamed %v", stream, got)
		}
	}
}
