package agent

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// TreeBudget bounds a whole tree of instances: every model call of the
// root and of every child draws from it. Zero fields are no limit.
type TreeBudget struct {
	Tokens int64   `json:"tokens,omitempty"` // prompt + output tokens
	USD    float64 `json:"usd,omitempty"`    // needs prices for the models used
}

// treeBudget is a TreeBudget being spent; it is the loop.Budget of every
// instance of the tree.
type treeBudget struct {
	limit  TreeBudget
	prices cost.Table

	mu     sync.Mutex
	tokens int64
	usd    float64
}

var _ loop.Budget = (*treeBudget)(nil)

// loopBudget is the tree's budget for one instance's runs, charged under
// the instance's model as deputy names it (provider:model), which is how
// prices are keyed; the loop knows only the name its requests carry. A nil
// interface when the tree has no budget.
func (tr *tree) loopBudget(model string) loop.Budget {
	if tr.budget == nil {
		return nil
	}
	return chargeAs{tr.budget, model}
}

type chargeAs struct {
	*treeBudget
	model string
}

func (c chargeAs) Spend(_ string, u llm.Usage) { c.treeBudget.Spend(c.model, u) }

// priced reports whether a USD budget can see what model spends.
func (b *treeBudget) priced(model string) bool {
	if b == nil || b.limit.USD <= 0 {
		return true
	}
	_, ok := b.prices.Lookup(model)
	return ok
}

func (b *treeBudget) Spend(model string, u llm.Usage) {
	c, _ := b.prices.Cost(model, u) // an unpriced model spends tokens only
	b.mu.Lock()
	b.tokens += u.Total()
	b.usd += c
	b.mu.Unlock()
}

func (b *treeBudget) Spent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return (b.limit.Tokens > 0 && b.tokens >= b.limit.Tokens) || (b.limit.USD > 0 && b.usd >= b.limit.USD)
}

func (b *treeBudget) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit.USD > 0 {
		return fmt.Sprintf("%d tokens and $%.4f of $%.4f spent", b.tokens, b.usd, b.limit.USD)
	}
	return fmt.Sprintf("%d of %d tokens spent", b.tokens, b.limit.Tokens)
}

// artifactTracker notes the files an instance wrote or edited, from its
// loop events: a write_file or edit_file call whose result was not an error.
type artifactTracker struct {
	pending map[string]string // tool_use id → path
	seen    map[string]bool
}

// observe returns a path the first time a successful call wrote it.
func (a *artifactTracker) observe(e loop.Event) string {
	switch e.Kind {
	case loop.EventToolCall:
		if e.Block.Name != "write_file" && e.Block.Name != "edit_file" {
			return ""
		}
		var in struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(e.Block.Input, &in) != nil || in.Path == "" {
			return ""
		}
		if a.pending == nil {
			a.pending, a.seen = map[string]string{}, map[string]bool{}
		}
		a.pending[e.Block.ID] = in.Path
	case loop.EventToolResult:
		path, ok := a.pending[e.Block.ToolUseID]
		if !ok {
			return ""
		}
		delete(a.pending, e.Block.ToolUseID)
		if e.Block.IsError || a.seen[path] {
			return ""
		}
		a.seen[path] = true
		return path
	}
	return ""
}
