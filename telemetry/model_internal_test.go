package telemetry

import "testing"

// The conventions' gen_ai.provider.name names the provider, not the wire:
// an openai-responses spec is OpenAI's.
func TestSetModelNamesTheProvider(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string][2]string{
		"anthropic:claude-test":  {"anthropic", "claude-test"},
		"openai:gpt-5":           {"openai", "gpt-5"},
		"openai-responses:gpt-5": {"openai", "gpt-5"},
		"ollama:llama3":          {"ollama", "llama3"},
		"fake":                   {"fake", "fake"},
	} {
		var in inst
		in.setModel(spec)
		if in.provider != want[0] || in.model != want[1] || in.spec != spec {
			t.Errorf("setModel(%q): provider %q model %q spec %q, want %v", spec, in.provider, in.model, in.spec, want)
		}
	}
}
