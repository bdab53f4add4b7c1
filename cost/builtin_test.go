package cost

import (
	"strings"
	"testing"
)

// Every built-in row prices its model under each name deputy or a
// provider's answer uses for it: provider:model, the bare model, and (for
// a model id with no snapshot date) a dated snapshot of it.
func TestEveryBuiltinRowResolves(t *testing.T) {
	t.Parallel()
	tab := Builtin()
	for _, r := range builtin {
		for _, m := range r.models {
			names := []string{r.provider + ":" + m, m}
			if family(m) == m {
				date := "-20991231"
				if r.provider == "openai" {
					date = "-2099-12-31"
				}
				names = append(names, r.provider+":"+m+date, m+date)
			}
			for _, name := range names {
				if p, ok := tab.Lookup(name); !ok || p != r.price {
					t.Errorf("Lookup(%q) = %+v, %v; want %+v", name, p, ok, r.price)
				}
			}
		}
		if p := r.price; p.Input <= 0 || p.Output <= 0 || p.CacheRead <= 0 || p.CacheRead >= p.Input {
			t.Errorf("%s %v: implausible %+v", r.provider, r.models, p)
		}
		if r.provider == "anthropic" && (r.price.CacheWrite <= r.price.Input || r.price.CacheWrite1h <= r.price.CacheWrite) {
			t.Errorf("%v: cache writes must cost more than input, 1h more than 5m: %+v", r.models, r.price)
		}
	}
}

// The models the issue names resolve, and the brief's three forms.
func TestBuiltinKnowsTheNamedModels(t *testing.T) {
	t.Parallel()
	tab := Builtin()
	for _, c := range []struct {
		model    string
		in, read float64
	}{
		{"anthropic:claude-sonnet-4-5", 3, 0.30},
		{"claude-sonnet-4-5-20250929", 3, 0.30},
		{"openai:gpt-5-mini", 0.25, 0.025},
		{"openai-responses:gpt-5-mini", 0.25, 0.025}, // OpenAI's other wire, the same prices
		{"anthropic:claude-haiku-4-5", 1, 0.10},
		{"openai:gpt-5.6", 4, 0.40}, // the alias OpenAI routes to Sol
	} {
		p, ok := tab.Lookup(c.model)
		if !ok || p.Input != c.in || p.CacheRead != c.read {
			t.Errorf("Lookup(%q) = %+v, %v; want input %v, cache_read %v", c.model, p, ok, c.in, c.read)
		}
	}
	if _, ok := tab.Lookup("ollama:llama3"); ok {
		t.Error("a local model must stay unpriced")
	}
	if _, ok := tab.Lookup("bedrock:claude-sonnet-4-5"); ok {
		t.Error("another provider's name must not take Anthropic's price")
	}
	tab["anthropic:x"] = Price{}
	if _, ok := Builtin()["anthropic:x"]; ok || !strings.Contains(PricesRead, "-") {
		t.Error("Builtin must hand out a copy")
	}
}
