package benchsub

import (
	"context"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// ForkConfig sizes the fork-reuse workload. The root reads one part file
// of PartBytes per turn for Parts turns, forking an analyst child on each
// of them (two on the last one, beside an isolated explorer for contrast),
// then forks one more child in a turn of its own, then answers. So the
// forks see transcripts from the first response's (a few thousand tokens
// of tool definitions) to Parts × PartBytes / 4 tokens, with sibling
// placeholders and without.
type ForkConfig struct {
	Parts     int
	PartBytes int // under 45,000 so that one read_file returns the whole part
	// MinCacheTokens is the server's smallest cacheable prefix (0: 1024).
	MinCacheTokens int
}

// DefaultFork grows the parent's transcript to about 30k tokens.
var DefaultFork = ForkConfig{Parts: 3, PartBytes: 37_000}

// ForkChild is one child's first request measured against the parent's
// request just before its spawn.
type ForkChild struct {
	Label string        `json:"label"`
	Mode  agentdef.Mode `json:"mode"`
	// ParentTurn is the parent's turn whose response spawned the child;
	// FirstResponse is true for turn 1 (the goal exempts it: the parent's
	// prefix is then only its tools, system prompt and task).
	ParentTurn    int  `json:"parent_turn"`
	FirstResponse bool `json:"first_response"`
	// PrefixShare is the share of the child's first request (bytes, in
	// cache order, cache markers removed) that is a prefix of the parent's
	// previous request.
	PrefixShare  float64 `json:"prefix_share"`
	PrefixBytes  int     `json:"prefix_bytes"`
	RequestBytes int     `json:"request_bytes"`
	PrefixElems  int     `json:"prefix_elements"`
	RequestElems int     `json:"request_elements"`
	ParentTokens int     `json:"parent_prompt_tokens"` // the parent's previous request
	// PromptTokens is the child's first request's prompt as the server
	// counted it (its usage), the base of CacheShare.
	PromptTokens  int64   `json:"prompt_tokens"`
	CacheRead     int64   `json:"cache_read_tokens"`
	CacheShare    float64 `json:"cache_read_share"` // CacheRead / PromptTokens
	CacheWrite    int64   `json:"cache_write_tokens"`
	ChildInstance string  `json:"instance"`
}

// ForkResult is the fork-reuse workload's figures.
type ForkResult struct {
	Wire     string      `json:"wire"`
	Children []ForkChild `json:"children"`
	// MinPrefixShare and MinCacheShare are the lowest over the fork
	// children spawned after the parent's first response (the goal's
	// figures).
	MinPrefixShare float64 `json:"min_prefix_share"`
	MinCacheShare  float64 `json:"min_cache_read_share"`
	// ParentPromptTokens is the largest prompt the parent sent.
	ParentPromptTokens int `json:"parent_max_prompt_tokens"`
}

const (
	forkSystem = "You are the root agent of the fork-reuse benchmark."
	forkMarker = "forked from this conversation"
)

// forkPlan lists, per parent turn, the children it spawns (labels), and
// whether it reads a part too.
func forkPlan(c ForkConfig) [][]string {
	var plan [][]string
	for k := 1; k <= c.Parts; k++ {
		turn := []string{fmt.Sprintf("fork-%d", k)}
		if k == c.Parts {
			turn = append(turn, fmt.Sprintf("fork-%db", k), fmt.Sprintf("isolated-%d", k))
		}
		plan = append(plan, turn)
	}
	return append(plan, []string{fmt.Sprintf("fork-%d", c.Parts+1)}) // a lone spawn
}

func forkScenario(c ForkConfig) string {
	var b strings.Builder
	b.WriteString(`
name: bench-fork
rules:
  - match: {last_user: "` + forkMarker + `"}
    text: "Conclusion: checked from the parent's context; nothing contradicts it."
  - match: {system: "read-only explorer"}
    text: "Conclusion: looked at it fresh; nothing to add."
`)
	for k, labels := range forkPlan(c) {
		turn := k + 1
		fmt.Fprintf(&b, "  - match: {turn: %d}\n", turn)
		if turn <= c.Parts {
			fmt.Fprintf(&b, "    text: \"Reading part %d while %d subagents work.\"\n", turn, len(labels))
		}
		b.WriteString("    tool_calls:\n")
		if turn <= c.Parts {
			fmt.Fprintf(&b, "      - {name: read_file, input: {path: part%d.txt}}\n", turn)
		}
		for _, l := range labels {
			typ := "analyst"
			if strings.HasPrefix(l, "isolated") {
				typ = "explorer"
			}
			fmt.Fprintf(&b, "      - {name: spawn_subagent, input: {subagent_type: %s, task: \"%s: check what the parts read so far say.\", description: %s}}\n", typ, l, l)
		}
	}
	fmt.Fprintf(&b, "  - match: {turn: %d}\n    text: \"Done: every part read and checked.\"\n", len(forkPlan(c))+1)
	return b.String()
}

// ForkReuse runs the fork-reuse workload once on wire.
func ForkReuse(ctx context.Context, wire string, c ForkConfig) (*ForkResult, error) {
	if c.Parts < 1 || c.PartBytes < 100 {
		return nil, fmt.Errorf("fork reuse: sizes too small: %+v", c)
	}
	files := map[string]string{}
	for i := 1; i <= c.Parts; i++ {
		files[fmt.Sprintf("part%d.txt", i)] = corpus(c.PartBytes, 100+i)
	}
	rg, err := newRig(files, forkScenario(c), "bench-fork.yaml", c.MinCacheTokens, 4, wire)
	if err != nil {
		return nil, err
	}
	defer rg.close()

	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var usage usageRecorder
	o, err := runForkRoot(ctx, rg, forkPlan(c), &usage)
	if err != nil {
		return nil, err
	}

	log := rg.srv.srv.Requests()
	res := &ForkResult{Wire: wire, MinPrefixShare: 1, MinCacheShare: 1}
	for _, lr := range log {
		if lr.Request != nil && isForkRoot(lr.Request) {
			res.ParentPromptTokens = max(res.ParentPromptTokens, llm.EstimateRequest(lr.Request))
		}
	}
	for _, in := range o.Instances[1:] {
		if in.State != instance.Completed {
			return nil, fmt.Errorf("fork run: child %s (%s) ended %s (%s)", in.Description, in.ID, in.State, in.Error)
		}
		ch := ForkChild{Label: in.Description, Mode: agentdef.Mode(in.Mode), ChildInstance: in.ID}
		if err := measureForkChild(wire, log, &ch, &usage); err != nil {
			return nil, err
		}
		if ch.Mode == agentdef.ModeFork && !ch.FirstResponse {
			res.MinPrefixShare = min(res.MinPrefixShare, ch.PrefixShare)
			res.MinCacheShare = min(res.MinCacheShare, ch.CacheShare)
		}
		res.Children = append(res.Children, ch)
	}
	return res, nil
}

// runForkRoot runs the root, whose scenario follows plan, with the
// analyst type it forks, and checks that it took one turn per step of the
// plan and an answer, and spawned every child the plan names.
func runForkRoot(ctx context.Context, rg *rig, plan [][]string, usage *usageRecorder) (*agent.Outcome, error) {
	r := &agent.Runner{OnEvent: usage.observe}
	o, err := r.Run(ctx, agent.Task{Task: "Read the parts and have each checked.", System: forkSystem, Model: rg.model,
		ModelName: ModelName, Tools: rg.ws.tools,
		Volatile: []*agentdef.Definition{{Name: "analyst", Description: "Checks the parent's reading, continuing from its context.",
			SystemPrompt: "Check the claim against what the conversation has read; do not change files.",
			Tools:        []string{"read_file", "glob", "grep"}, Mode: agentdef.ModeFork}}})
	if err != nil {
		return nil, fmt.Errorf("fork run: %w", err)
	}
	kids := 0
	for _, l := range plan {
		kids += len(l)
	}
	if o.Result.Turns != len(plan)+1 || len(o.Instances) != 1+kids {
		return nil, fmt.Errorf("fork run: %d turns, %d instances, want %d and %d", o.Result.Turns, len(o.Instances), len(plan)+1, 1+kids)
	}
	return o, nil
}

// isForkRoot reports whether q is the root's request: its system prompt,
// and no fork's marker (a fork shares the system prompt).
func isForkRoot(q *llm.Request) bool {
	if !strings.HasPrefix(q.System, forkSystem) {
		return false
	}
	for _, m := range q.Messages {
		if strings.Contains(m.Text(), forkMarker) {
			return false
		}
	}
	return true
}

// measureForkChild fills in the figures of child ch (its label, mode and
// instance set): how much of its first request is a prefix of the root's
// request just before it, and how much of its prompt the server read from
// the cache.
func measureForkChild(wire string, log []fake.LoggedRequest, ch *ForkChild, usage *usageRecorder) error {
	first, prev := childFirstRequest(log, ch.Mode, ch.Label)
	if first < 0 || prev < 0 {
		return fmt.Errorf("fork reuse: child %s: no first request (%d) or parent request before it (%d) in the log", ch.Label, first, prev)
	}
	p, err := PrefixOf(wire, log[prev].Body, log[first].Body)
	if err != nil {
		return fmt.Errorf("fork reuse: child %s: %w", ch.Label, err)
	}
	ch.PrefixShare, ch.PrefixBytes, ch.RequestBytes = p.Share(), p.Matching, p.Total
	ch.PrefixElems, ch.RequestElems = p.MatchingElements, p.Elements
	pq := log[prev].Request
	ch.ParentTokens = llm.EstimateRequest(pq)
	for _, m := range pq.Messages {
		if m.Role == llm.Assistant {
			ch.ParentTurn++
		}
	}
	ch.ParentTurn++
	ch.FirstResponse = ch.ParentTurn == 1
	u, ok := usage.firstOf(ch.ChildInstance)
	if !ok {
		return fmt.Errorf("fork reuse: child %s: no first response", ch.Label)
	}
	ch.PromptTokens, ch.CacheRead, ch.CacheWrite = u.Prompt(), u.CacheReadTokens, u.CacheWriteTokens
	ch.CacheShare = ratio(float64(u.CacheReadTokens), float64(u.Prompt()))
	return nil
}

// childFirstRequest finds, in the server's log, the first request of the
// child labelled label and the last root request before it; -1 for one
// not found. A fork's first request is the root's transcript with the
// fork's marker and its task last; an isolated child's has its task alone.
func childFirstRequest(log []fake.LoggedRequest, mode agentdef.Mode, label string) (first, prev int) {
	prev = -1
	for i, lr := range log {
		q := lr.Request
		if q == nil {
			continue
		}
		if isForkRoot(q) {
			prev = i
			continue
		}
		mine := false
		if mode == agentdef.ModeFork {
			t := lastUserText(q)
			mine = strings.Contains(t, forkMarker) && strings.Contains(t, label+":")
		} else {
			mine = len(q.Messages) == 1 && strings.HasPrefix(q.Messages[0].Text(), label+":")
		}
		if mine {
			return i, prev
		}
	}
	return -1, prev
}
