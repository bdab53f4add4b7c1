package cost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/llm"
)

// The hint is a line a user pastes under deputy.yaml's prices: it must load and
// price the model it names, for every form of model name deputy uses.
func TestHintLineLoadsAndPricesTheModel(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"openai:gpt-9", "anthropic:claude-new-7-20270101", "ollama:qwen3:8b", "fake"} {
		line := cost.Hint(model)
		path := filepath.Join(t.TempDir(), "deputy.yaml")
		if err := os.WriteFile(path, []byte("prices:\n  "+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := agentdef.LoadConfig(path)
		if err != nil {
			t.Fatalf("Hint(%q) = %s: %v", model, line, err)
		}
		if _, ok := c.Prices.Cost(model, llm.Usage{InputTokens: 1}); !ok {
			t.Errorf("Hint(%q) = %s does not price it (prices %v)", model, line, c.Prices)
		}
	}
}
