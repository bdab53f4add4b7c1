package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/tool"
)

// probes are the calls every node of a permission tree makes once: what
// each was decided is read back from its transcript.
var probes = []struct{ tool, input string }{
	{"bash", `{"command":"git push origin main"}`},
	{"bash", `{"command":"ls -la"}`},
	{"bash", `{"command":"make && rm -rf build"}`},
	{"write_file", `{"path":"src/a.go","content":"x"}`},
	{"write_file", `{"path":".git/config","content":"x"}`},
	{"read_file", `{"path":"README.md"}`},
	{"read_file", `{"path":"/etc/passwd"}`},
	{"web_fetch", `{"url":"https://example.com/x"}`},
}

// probeTool is a side-effect-free stand-in for one of deputy's tools: its
// run says it ran.
type probeTool struct{ name string }

func (p probeTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: p.name, Description: p.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (probeTool) ReadOnly() bool { return false }
func (p probeTool) Run(context.Context, json.RawMessage) (string, error) {
	return "ran", nil
}

// treeModel plays every node of a permission tree: a node's first turn
// makes the probe calls, its second spawns the children its type lists
// (one turn, in parallel), its third answers. The node's type is read
// from its system prompt ("node-K").
type treeModel struct{ kids map[string][]string }

func (m *treeModel) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	typ := "root"
	if i := strings.Index(req.System, "node-"); i >= 0 {
		typ = strings.Fields(req.System[i:])[0]
	}
	assistants := 0
	for _, msg := range req.Messages {
		if msg.Role == llm.Assistant {
			assistants++
		}
	}
	var blocks []llm.Block
	switch assistants {
	case 0:
		for i, p := range probes {
			blocks = append(blocks, llm.ToolUse(fmt.Sprintf("probe_%d", i), p.tool, json.RawMessage(p.input)))
		}
	case 1:
		for i, k := range m.kids[typ] {
			in, _ := json.Marshal(map[string]string{"subagent_type": k, "task": "probe"})
			blocks = append(blocks, llm.ToolUse(fmt.Sprintf("spawn_%d", i), agentdef.SpawnTool, in))
		}
	}
	if len(blocks) == 0 {
		return &llm.Response{Content: []llm.Block{llm.Text("done")}, StopReason: llm.StopEndTurn}, nil
	}
	return &llm.Response{Content: blocks, StopReason: llm.StopToolUse}, nil
}

// refuser is an Approver that refuses every call, saying it was asked.
type refuser struct {
	mu    sync.Mutex
	asked []agent.Approval
}

func (r *refuser) Approve(_ context.Context, a agent.Approval) (bool, string, error) {
	r.mu.Lock()
	r.asked = append(r.asked, a)
	r.mu.Unlock()
	return false, "asked", nil
}

// outcomes reads a node's probe decisions from its transcript.
func outcomes(t *testing.T, msgs []llm.Message) []permission.Outcome {
	t.Helper()
	if len(msgs) < 3 {
		t.Fatalf("transcript of %d messages", len(msgs))
	}
	var out []permission.Outcome
	for _, b := range msgs[2].Content {
		switch {
		case !b.IsError && b.Text == "ran":
			out = append(out, permission.Allow)
		case strings.Contains(b.Text, "permission denied: asked"):
			out = append(out, permission.Ask)
		case strings.HasPrefix(b.Text, "permission denied:"):
			out = append(out, permission.Deny)
		default:
			t.Fatalf("probe result %q", b.Text)
		}
	}
	return out
}

var (
	rulePool = []string{"Bash(git push:*)", "Bash(ls:*)", "Bash(make:*)", "Bash(rm:*)", "Bash", "Edit(src/**)",
		"Edit", "Read(/etc/**)", "Read", "WebFetch(domain:example.com)", "WebFetch", "Write(.git/**)"}
	modePool = []string{"", "plan", "dontAsk", "default", "acceptEdits", "bypassPermissions"}
)

func randomRules(r *rand.Rand) map[string]any {
	lists := map[string]any{}
	for _, k := range []string{"allow", "ask", "deny"} {
		var l []any
		for range r.IntN(3) {
			l = append(l, rulePool[r.IntN(len(rulePool))])
		}
		if l != nil {
			lists[k] = l
		}
	}
	return lists
}

// Over random trees of definitions (modes and rules of their own) spawned
// through the real spawn tool, no node's decision on any probe is ever more
// permissive than its parent's; a child whose mode is wider than its
// parent's never runs (its spawn is refused).
func TestPermissionsNeverWidenDownTheTree(t *testing.T) {
	t.Parallel()
	children, seen := 0, map[permission.Outcome]bool{}
	defer func() {
		// Not vacuous: children ran, and every outcome came up.
		if children < 20 || len(seen) != 3 {
			t.Errorf("%d children over the seeds, outcomes seen %v", children, seen)
		}
	}()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		types := 2 + r.IntN(4)
		m := &treeModel{kids: map[string][]string{}}
		var defs []*agentdef.Definition
		for k := range types {
			name := fmt.Sprintf("node-%d", k)
			extra := map[string]any{"permissions": randomRules(r)}
			if mode := modePool[r.IntN(len(modePool))]; mode != "" {
				extra["permissionMode"] = mode
			}
			defs = append(defs, &agentdef.Definition{Name: name, Description: name, SystemPrompt: "You are " + name + " .",
				Tools: []string{"bash", "write_file", "read_file", "web_fetch", agentdef.SpawnTool}, Extra: extra})
			for j := k + 1; j < types; j++ {
				if r.IntN(2) == 0 {
					m.kids[name] = append(m.kids[name], fmt.Sprintf("node-%d", j))
				}
			}
		}
		for j := range types {
			if r.IntN(2) == 0 {
				m.kids["root"] = append(m.kids["root"], fmt.Sprintf("node-%d", j))
			}
		}
		var rootSet permission.Set
		for k, l := range randomRules(r) {
			for _, text := range l.([]any) {
				rule, err := permission.ParseRule(text.(string))
				if err != nil {
					t.Fatal(err)
				}
				switch k {
				case "allow":
					rootSet.Allow = append(rootSet.Allow, rule)
				case "ask":
					rootSet.Ask = append(rootSet.Ask, rule)
				default:
					rootSet.Deny = append(rootSet.Deny, rule)
				}
			}
		}
		rootMode := permission.Mode(modePool[1+r.IntN(len(modePool)-1)])
		var tools []tool.Tool
		for _, n := range []string{"bash", "write_file", "read_file", "web_fetch"} {
			tools = append(tools, probeTool{n})
		}
		set := tool.MustSet(tools...)
		runner := &agent.Runner{MaxDepth: 4, Approver: &refuser{},
			Permissions: &agent.Permissions{Policy: permission.Policy{Mode: rootMode, Set: rootSet}, ProjectDir: "/work/p"}}
		o, err := runner.Run(context.Background(), agent.Task{Task: "probe", System: "root", Model: m, ModelName: "fake",
			Tools: set, Volatile: defs})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		byID := map[string][]permission.Outcome{}
		modes := map[string]permission.Mode{}
		for _, in := range o.Instances {
			msgs, _ := o.Transcript(in.ID)
			byID[in.ID] = outcomes(t, msgs)
			modes[in.ID] = rootMode
			for _, d := range defs {
				if d.Name == in.Type {
					mode, _ := d.Extra["permissionMode"].(string)
					modes[in.ID] = permission.Mode(mode)
				}
			}
		}
		for _, in := range o.Instances {
			for _, d := range byID[in.ID] {
				seen[d] = true
			}
			if in.Parent == "" {
				continue
			}
			children++
			if mine := modes[in.ID]; mine != "" && mine.Wider(modes[in.Parent]) && modes[in.Parent] != "" {
				t.Errorf("seed %d: %s (%s) ran under %s (%s)", seed, in.ID, mine, in.Parent, modes[in.Parent])
			}
			mine, theirs := byID[in.ID], byID[in.Parent]
			for i := range probes {
				if mine[i] < theirs[i] {
					t.Errorf("seed %d: %s (%s) decided %s %s as %s, its parent %s (%s) as %s", seed, in.ID, in.Type,
						probes[i].tool, probes[i].input, mine[i], in.Parent, in.Type, theirs[i])
				}
			}
		}
	}
}

// A bypassPermissions child under a default parent is refused at spawn,
// with the reason as the spawn call's error; nothing of it runs.
func TestWiderModeRefusedAtSpawn(t *testing.T) {
	t.Parallel()
	defs := []*agentdef.Definition{{Name: "node-1", Description: "wide", SystemPrompt: "You are node-1 .",
		Tools: []string{"bash"}, Extra: map[string]any{"permissionMode": "bypassPermissions"}}}
	m := &treeModel{kids: map[string][]string{"root": {"node-1"}}}
	runner := &agent.Runner{Approver: &refuser{}, Permissions: &agent.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}}}
	o, err := runner.Run(context.Background(), agent.Task{Task: "probe", System: "root", Model: m, ModelName: "fake",
		Tools: tool.MustSet(probeTool{"bash"}), Volatile: defs})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Instances) != 1 {
		t.Fatalf("%d instances: the wider child must not start", len(o.Instances))
	}
	msgs, _ := o.Transcript(o.Instances[0].ID)
	res := msgs[4].Content[0]
	if !res.IsError || !strings.Contains(res.Text, "spawn refused") || !strings.Contains(res.Text, "bypassPermissions") ||
		!strings.Contains(res.Text, "wider") {
		t.Fatalf("spawn result %+v", res)
	}
}

// With no Approver and nothing durable, a held call suspends the instance
// asking, like a question; the call did not run.
func TestHeldCallInMemoryLeavesTheRootAsking(t *testing.T) {
	t.Parallel()
	m := &treeModel{}
	ask, _ := permission.ParseRule("Bash(git push:*)")
	runner := &agent.Runner{Permissions: &agent.Permissions{Policy: permission.Policy{Set: permission.Set{Ask: []permission.Rule{ask}}}}}
	o, err := runner.Run(context.Background(), agent.Task{Task: "probe", System: "root", Model: m, ModelName: "fake",
		Tools: tool.MustSet(probeTool{"bash"}, probeTool{"write_file"}, probeTool{"read_file"}, probeTool{"web_fetch"})})
	if err != nil {
		t.Fatal(err)
	}
	if o.Instances[0].State != "asking" || o.Result.Pending == nil || o.Result.Pending.Content[0].Text != "[deputy] Held: this call waits for approval." {
		t.Fatalf("state %s pending %+v", o.Instances[0].State, o.Result.Pending)
	}
}
