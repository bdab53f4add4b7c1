// Package cost turns token usage into money: a price table per model and
// the arithmetic, kept apart so the loop and the providers never need to
// know what anything costs.
package cost

import (
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// Price is USD per million tokens of each kind.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cache_write"`
	CacheRead  float64 `json:"cache_read"`
}

// Of is what usage costs at p. Usage.InputTokens are the uncached ones, so
// the four kinds add up without double counting.
func (p Price) Of(u llm.Usage) float64 {
	return (float64(u.InputTokens)*p.Input +
		float64(u.OutputTokens)*p.Output +
		float64(u.CacheWriteTokens)*p.CacheWrite +
		float64(u.CacheReadTokens)*p.CacheRead) / 1e6
}

// Table holds prices by model, keyed as deputy names models:
// provider:model ("anthropic:claude-haiku-4-5"), or a bare name.
type Table map[string]Price

// Lookup finds model's price: by its full name; for provider:model, then
// by the model's own name, so one entry can price a model reached through
// several providers; for a bare name, then by the one provider:model entry
// with that model (two such entries with different providers are
// ambiguous, so neither is used).
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	if _, m, found := strings.Cut(model, ":"); found {
		p, ok := t[m]
		return p, ok
	}
	// A bare name, as requests carry it: the one provider:model entry for it.
	var found Price
	n := 0
	for k, p := range t {
		if _, m, ok := strings.Cut(k, ":"); ok && m == model {
			found, n = p, n+1
		}
	}
	return found, n == 1
}

// Cost is what usage on model costs; ok is false when the model has no
// price (an unknown cost is not zero).
func (t Table) Cost(model string, u llm.Usage) (usd float64, ok bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Of(u), true
}
