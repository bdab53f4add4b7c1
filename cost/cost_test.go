package cost

import (
	"math"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

func TestPriceOf(t *testing.T) {
	t.Parallel()
	p := Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}
	u := llm.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheWriteTokens: 200_000, CacheReadTokens: 2_000_000}
	want := 3 + 1.5 + 0.75 + 0.6
	if got := p.Of(u); math.Abs(got-want) > 1e-9 {
		t.Fatalf("Of = %v, want %v", got, want)
	}
}

func TestTableLookup(t *testing.T) {
	t.Parallel()
	tab := Table{
		"anthropic:claude-haiku-4-5": {Input: 1},
		"gpt-5-mini":                 {Input: 0.25},
	}
	for _, c := range []struct {
		model string
		want  float64
		ok    bool
	}{
		{"anthropic:claude-haiku-4-5", 1, true},
		{"openai:gpt-5-mini", 0.25, true}, // by the model's own name
		{"gpt-5-mini", 0.25, true},
		{"claude-haiku-4-5", 1, true}, // a bare name finds its one provider:model entry
		{"ollama:llama3", 0, false},
	} {
		p, ok := tab.Lookup(c.model)
		if ok != c.ok || p.Input != c.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.model, p.Input, ok, c.want, c.ok)
		}
	}
	tab["bedrock:claude-haiku-4-5"] = Price{Input: 2}
	if _, ok := tab.Lookup("claude-haiku-4-5"); ok {
		t.Error("a bare name with two provider entries must not pick one")
	}
	if c, ok := tab.Cost("openai:gpt-5-mini", llm.Usage{InputTokens: 4_000_000}); !ok || c != 1 {
		t.Errorf("Cost = %v, %v; want 1, true", c, ok)
	}
	if _, ok := tab.Cost("nope", llm.Usage{InputTokens: 5}); ok {
		t.Error("an unpriced model must report ok=false, not a zero cost")
	}
}

// One-hour cache writes are charged at CacheWrite1h, the rest of the
// writes at CacheWrite; a row with no one-hour price charges them all at
// CacheWrite, and a one-hour count past the writes' total is held to it.
func TestPriceOfOneHourCacheWrites(t *testing.T) {
	t.Parallel()
	sonnet := Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheWrite1h: 6, CacheRead: 0.3}
	u := llm.Usage{CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 400_000}
	for _, c := range []struct {
		name string
		p    Price
		u    llm.Usage
		want float64
	}{
		{"split", sonnet, u, 0.6*3.75 + 0.4*6},
		{"all one-hour", sonnet, llm.Usage{CacheWriteTokens: 500_000, CacheWrite1hTokens: 500_000}, 3},
		{"no one-hour price", Price{CacheWrite: 3.75}, u, 3.75},
		{"one-hour past the total", sonnet, llm.Usage{CacheWriteTokens: 100_000, CacheWrite1hTokens: 900_000}, 0.6},
	} {
		if got := c.p.Of(c.u); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Of = %v, want %v", c.name, got, c.want)
		}
	}
	// The built-in rows know the one-hour price: 2x base input, where a
	// five-minute write is 1.25x.
	p, ok := Builtin().Lookup("anthropic:claude-sonnet-4-5")
	if !ok {
		t.Fatal("no built-in price for claude-sonnet-4-5")
	}
	if got, want := p.Of(llm.Usage{CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 1_000_000}), 2*p.Input; math.Abs(got-want) > 1e-9 {
		t.Errorf("a million one-hour writes on sonnet 4.5 cost %v, want %v", got, want)
	}
}
