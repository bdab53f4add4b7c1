package benchsub

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// EconomyConfig sizes the context-economy workload: a root spawns Children
// explorers in one turn; each reads Parts files of PartBytes bytes (all
// of them, in one turn of parallel read_file calls), writes a report of
// ReportChars characters, is asked by the relay to summarize it within the
// report cap (the built-in 3000), answers SummaryChars characters, and the
// root merges the reports.
type EconomyConfig struct {
	Children     int
	Parts        int
	PartBytes    int // each part's read_file result must stay under 45,000 bytes
	ReportChars  int
	SummaryChars int
	// MinCacheTokens is the server's smallest cacheable prefix (0: 1024).
	MinCacheTokens int
}

// DefaultEconomy is the workload: children that read about 40k
// tokens and write reports of 10,000 characters.
var DefaultEconomy = EconomyConfig{Children: 4, Parts: 4, PartBytes: 37_000, ReportChars: 10_000, SummaryChars: 2_900}

// EconomyResult is what the context-economy workload measured.
type EconomyResult struct {
	Wire     string `json:"wire"`
	Children int    `json:"children"`
	// ChildReadTokens is the tokens of file content one child's tool
	// results carried (the mean over children).
	ChildReadTokens int `json:"child_read_tokens"`
	// ChildReportChars is the length of a child's first answer, before
	// the relay's summary step; RelayedReportChars the report the parent
	// got (the largest).
	ChildReportChars   int `json:"child_report_chars"`
	RelayedReportChars int `json:"relayed_report_chars"`
	// IntoParent is, per child in call order, the tokens of the
	// tool_result the parent's next request carried for it.
	IntoParent []int `json:"into_parent_tokens"`
	// MaxIntoParent is the largest of IntoParent (the goal's figure).
	MaxIntoParent int `json:"max_into_parent_tokens"`
	// DeltaPerChild is the growth of the parent's prompt between its two
	// requests, per child: the tool results plus the spawn calls that
	// asked for them.
	DeltaPerChild float64 `json:"request_delta_per_child_tokens"`
	// ChildTokens and ParentTokens are prompt + output tokens over every
	// request of the children and of the parent: prompts from the request
	// log, output from the usage the server answered.
	ChildTokens  int64   `json:"child_tokens"`
	ParentTokens int64   `json:"parent_tokens"`
	Ratio        float64 `json:"child_over_parent"`
	// ChildRequests counts the children's requests in the log (turns plus
	// the summary request each).
	ChildRequests int `json:"child_requests"`
	// ChildPromptByUsage is the children's prompt tokens as the server
	// reported them in usage, beside ChildPromptByLog, the same by
	// llm.EstimateRequest of the logged requests. They agree on the
	// Anthropic wire; on the OpenAI wire the server counts a message's
	// overhead per wire message (each tool result is a message of its
	// own), a few tokens more per request.
	ChildPromptByLog   int64 `json:"child_prompt_tokens_by_log"`
	ChildPromptByUsage int64 `json:"child_prompt_tokens_by_usage"`
}

const economySystem = "You are the root agent of the context-economy benchmark."

func economyScenario(c EconomyConfig) string {
	const conclusion = "Conclusion: "
	return fmt.Sprintf(`
name: bench-economy
rules:
  - match: {system: "read-only explorer", last_user: "Rewrite it within"}
    text: "%[1]s{{lorem %[2]d}}"
  - match: {system: "read-only explorer", turn: 1}
    tool_calls:
      - {name: read_file, repeat: %[3]d, input: {path: "part{{.I}}.txt"}}
  - match: {system: "read-only explorer", turn: 2}
    text: "%[1]s{{lorem %[4]d}}"
  - match: {turn: 1}
    text: "Delegating the reading to %[5]d explorers."
    tool_calls:
      - name: spawn_subagent
        repeat: %[5]d
        input: {subagent_type: explorer, task: "Read part1.txt to part%[3]d.txt and report what they say about topic {{.I}}.", description: "topic {{.I}}"}
  - match: {turn: 2}
    text: "Merged {{len .ToolResults}} reports."
`, conclusion, c.SummaryChars-len(conclusion), c.Parts, c.ReportChars-len(conclusion), c.Children)
}

// Economy runs the context-economy workload once on wire.
func Economy(ctx context.Context, wire string, c EconomyConfig) (*EconomyResult, error) {
	if c.Children < 1 || c.Parts < 1 || c.PartBytes < 100 || c.ReportChars < 100 || c.SummaryChars < 100 {
		return nil, fmt.Errorf("economy: sizes too small: %+v", c)
	}
	files := map[string]string{}
	for i := 1; i <= c.Parts; i++ {
		files[fmt.Sprintf("part%d.txt", i)] = corpus(c.PartBytes, i)
	}
	rg, err := newRig(files, economyScenario(c), "bench-economy.yaml", c.MinCacheTokens, c.Children, wire)
	if err != nil {
		return nil, err
	}
	defer rg.close()

	ctx, cancel := withTimeout(ctx)
	defer cancel()
	o, err := runEconomyRoot(ctx, rg, c)
	if err != nil {
		return nil, err
	}

	res := &EconomyResult{Wire: wire, Children: c.Children}
	parent, childRead, err := res.readLog(rg.srv.srv.Requests())
	if err != nil {
		return nil, err
	}
	if err := res.measureParent(parent, c.Children); err != nil {
		return nil, err
	}
	res.addUsage(o, childRead, c.Children)
	return res, nil
}

// runEconomyRoot runs the root, which spawns the explorers in its first
// turn and merges their reports in its second, and checks that it did
// and that every child completed.
func runEconomyRoot(ctx context.Context, rg *rig, c EconomyConfig) (*agent.Outcome, error) {
	r := &agent.Runner{MaxParallel: c.Children}
	o, err := r.Run(ctx, agent.Task{Task: "Survey the corpus.", System: economySystem, Model: rg.model, ModelName: ModelName, Tools: rg.ws.tools})
	if err != nil {
		return nil, fmt.Errorf("economy run: %w", err)
	}
	if o.Result.Turns != 2 || len(o.Instances) != 1+c.Children {
		return nil, fmt.Errorf("economy run: %d turns, %d instances, want 2 and %d", o.Result.Turns, len(o.Instances), 1+c.Children)
	}
	for _, in := range o.Instances[1:] {
		if in.State != instance.Completed {
			return nil, fmt.Errorf("economy run: child %s ended %s (%s)", in.ID, in.State, in.Error)
		}
	}
	return o, nil
}

// readLog goes through the server's log: the root's requests are
// returned, in order, and their prompts counted; the children's are
// counted, with the file content their reads carried (childRead) and
// the length of their first answers, which their summary requests
// repeat.
func (res *EconomyResult) readLog(log []fake.LoggedRequest) (parent []*llm.Request, childRead int64, err error) {
	for _, lr := range log {
		q := lr.Request
		if q == nil {
			return nil, 0, fmt.Errorf("economy: logged request %d did not decode", lr.N)
		}
		if strings.HasPrefix(q.System, economySystem) { // the root's prompt, then the delegation guidance
			parent = append(parent, q)
			res.ParentTokens += int64(llm.EstimateRequest(q))
			continue
		}
		res.ChildRequests++
		res.ChildPromptByLog += int64(llm.EstimateRequest(q))
		// The turn after the reads carries them; count each read once.
		if len(q.Messages) == 3 {
			for _, b := range toolResults(q) {
				childRead += int64(llm.EstimateTokens(b.Text))
			}
		}
		if text := lastUserText(q); strings.Contains(text, "Rewrite it within") {
			// The summary request repeats the child's first answer.
			res.ChildReportChars = max(res.ChildReportChars, len([]rune(q.Messages[len(q.Messages)-2].Text())))
		}
	}
	return parent, childRead, nil
}

// measureParent measures what the children cost the root's context: the
// tokens each report brought into its second request, and that
// request's growth over the first, per child.
func (res *EconomyResult) measureParent(parent []*llm.Request, children int) error {
	if len(parent) != 2 {
		return fmt.Errorf("economy: %d parent requests in the log, want 2", len(parent))
	}
	for _, b := range toolResults(parent[1]) {
		n := llm.EstimateTokens(b.Text)
		res.IntoParent = append(res.IntoParent, n)
		res.MaxIntoParent = max(res.MaxIntoParent, n)
	}
	if len(res.IntoParent) != children {
		return fmt.Errorf("economy: the parent's second request carries %d tool results, want %d", len(res.IntoParent), children)
	}
	res.DeltaPerChild = float64(llm.EstimateRequest(parent[1])-llm.EstimateRequest(parent[0])) / float64(children)
	return nil
}

// addUsage completes the totals from the usage the server answered (the
// output tokens, which the log does not show) and the reports the root
// got, and derives the per-child read and the ratio.
func (res *EconomyResult) addUsage(o *agent.Outcome, childRead int64, children int) {
	var childUsage llm.Usage
	for _, in := range o.Instances[1:] {
		childUsage.Add(in.Usage)
		res.RelayedReportChars = max(res.RelayedReportChars, utf8.RuneCountInString(in.Report))
	}
	res.ChildTokens = res.ChildPromptByLog + childUsage.OutputTokens
	res.ChildPromptByUsage = childUsage.Prompt()
	res.ParentTokens += o.Instances[0].Usage.OutputTokens
	res.ChildReadTokens = int(childRead) / children
	res.Ratio = ratio(float64(res.ChildTokens), float64(res.ParentTokens))
}
