package cost

import "testing"

func TestLookupDatedIDsAndAliases(t *testing.T) {
	t.Parallel()
	tab := Table{
		"anthropic:claude-sonnet-4-5": {Input: 3},
		"openai:gpt-5-mini":           {Input: 0.25},
		"gpt-4o-2024-08-06":           {Input: 2.5}, // keyed by one snapshot
		"azure:gpt-5-mini":            {Input: 0.3},
	}
	for _, c := range []struct {
		model string
		want  float64
		ok    bool
	}{
		{"anthropic:claude-sonnet-4-5-20250929", 3, true}, // Anthropic's dated id
		{"claude-sonnet-4-5-20250929", 3, true},           // bare, as a response names it
		{"claude-sonnet-4-5@20250929", 3, true},           // Vertex AI's form
		{"anthropic:claude-sonnet-4-5-latest", 3, true},
		{"openai:gpt-5-mini-2025-08-07", 0.25, true}, // OpenAI's dated id
		{"openai:gpt-4o", 2.5, true},                 // a snapshot's row prices its model
		{"openai:gpt-4o-2024-11-20", 2.5, true},      // and its other snapshots
		{"gpt-5-mini", 0, false},                     // two providers, two prices
		{"bedrock:claude-sonnet-4-5", 0, false},      // another provider is never used
		{"anthropic:claude-sonnet-4-50", 0, false},   // not a date: another model
		{"anthropic:claude-sonnet-4", 0, false},      // a prefix is not a family
		{"openai:gpt-5-mini-2025-0807", 0, false},    // a malformed date is part of the name
	} {
		p, ok := tab.Lookup(c.model)
		if ok != c.ok || p.Input != c.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.model, p.Input, ok, c.want, c.ok)
		}
	}
}

func TestLookupPrefersTheExactName(t *testing.T) {
	t.Parallel()
	tab := Table{
		"claude-sonnet-4-5":                    {Input: 3},
		"anthropic:claude-sonnet-4-5-20250929": {Input: 9},
	}
	// The exact model name beats a closer provider with the family only.
	if p, ok := tab.Lookup("anthropic:claude-sonnet-4-5"); !ok || p.Input != 3 {
		t.Errorf("Lookup = %v, %v; want 3 (the exact name, bare)", p.Input, ok)
	}
	if p, ok := tab.Lookup("anthropic:claude-sonnet-4-5-20250929"); !ok || p.Input != 9 {
		t.Errorf("Lookup = %v, %v; want 9 (its own key)", p.Input, ok)
	}
	// Equal prices under two keys are not ambiguous.
	tab = Table{"anthropic:claude-haiku-4-5": {Input: 1}, "vertex:claude-haiku-4-5": {Input: 1}}
	if p, ok := tab.Lookup("claude-haiku-4-5"); !ok || p.Input != 1 {
		t.Errorf("Lookup = %v, %v; want 1", p.Input, ok)
	}
}

func TestWithOverridesWhatItShadows(t *testing.T) {
	t.Parallel()
	base := Table{
		"anthropic:claude-sonnet-4-5":          {Input: 3},
		"anthropic:claude-sonnet-4-5-20250929": {Input: 3},
		"openrouter:claude-sonnet-4-5":         {Input: 3.3},
		"openai:gpt-5-mini":                    {Input: 0.25},
	}
	got := base.With(Table{"claude-sonnet-4-5": {Input: 1}, "openai:gpt-5-mini-2025-08-07": {Input: 0.5}})
	for _, c := range []struct {
		model string
		want  float64
	}{
		{"anthropic:claude-sonnet-4-5", 1},          // a bare override beats the provider's row
		{"anthropic:claude-sonnet-4-5-20250929", 1}, // and its dated rows
		{"openrouter:claude-sonnet-4-5", 1},         // a bare override speaks for every provider
		{"openai:gpt-5-mini", 0.5},                  // a dated override prices its family
	} {
		if p, ok := got.Lookup(c.model); !ok || p.Input != c.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", c.model, p.Input, ok, c.want)
		}
	}
	if base["anthropic:claude-sonnet-4-5"].Input != 3 || len(base) != 4 {
		t.Error("With changed its receiver")
	}
	// An override naming one provider leaves the others alone.
	got = base.With(Table{"anthropic:claude-sonnet-4-5": {Input: 2}})
	if p, _ := got.Lookup("openrouter:claude-sonnet-4-5"); p.Input != 3.3 {
		t.Errorf("openrouter's row = %v, want 3.3", p.Input)
	}
	if p, _ := got.Lookup("anthropic:claude-sonnet-4-5-20250929"); p.Input != 2 {
		t.Errorf("the dated id = %v, want the override's 2", p.Input)
	}
}

func TestUnpricedSaysSoOnce(t *testing.T) {
	t.Parallel()
	var u Unpriced
	if !u.First("openai:gpt-9") || u.First("openai:gpt-9") || !u.First("openai:gpt-10") {
		t.Error("First must be true once per model")
	}
}
