package agent_test

import (
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
)

// A runner with no deputy.yaml still prices current models from the
// built-in table, and deputy.yaml's prices win over it, bare or dated.
func TestRunnerPricesBuiltinUnderDeputyYAML(t *testing.T) {
	t.Parallel()
	bare := (&agent.Runner{}).Prices()
	if p, ok := bare.Lookup("anthropic:claude-sonnet-4-5-20250929"); !ok || p.Input != 3 {
		t.Fatalf("built-in price = %+v, %v; want input 3", p, ok)
	}
	cfg, err := agentdef.ParseConfig("deputy.yaml", []byte("prices:\n  claude-sonnet-4-5: {input: 1, output: 2}\n  "+cost.Hint("openai:gpt-9")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	prices := (&agent.Runner{Config: cfg}).Prices()
	for _, m := range []string{"anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5"} {
		if p, ok := prices.Lookup(m); !ok || p.Input != 1 || p.Output != 2 {
			t.Errorf("Lookup(%q) = %+v, %v; want deputy.yaml's input 1, output 2", m, p, ok)
		}
	}
	if _, ok := prices.Lookup("openai:gpt-9"); !ok {
		t.Error("the hint's line must price its model")
	}
	if p, ok := prices.Lookup("openai:gpt-5-mini"); !ok || p.Input != 0.25 {
		t.Errorf("an unshadowed built-in row = %+v, %v; want input 0.25", p, ok)
	}
	if _, ok := cfg.Prices["anthropic:claude-haiku-4-5"]; ok {
		t.Error("Prices must not write the built-in rows into deputy.yaml's table")
	}
}
