// Package cost turns token usage into money: a price table per model and
// the arithmetic, kept apart so the loop and the providers never need to
// know what anything costs.
package cost

import (
	"github.com/deputy-run/deputy/llm"
)

// Price is USD per million tokens of each kind.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cache_write"`
	CacheRead  float64 `json:"cache_read"`
	// CacheWrite1h is Anthropic's price of a one-hour cache write
	// (anthropic.Options.CacheTTL = CacheTTL1h), charged for
	// Usage.CacheWrite1hTokens. Zero means the row has none (OpenAI's, a
	// deputy.yaml price): its one-hour writes are charged at CacheWrite.
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
}

// Of is what usage costs at p. Usage.InputTokens are the uncached ones and
// CacheWrite1hTokens a part of CacheWriteTokens, so the kinds add up
// without double counting.
func (p Price) Of(u llm.Usage) float64 {
	w1h := max(0, min(u.CacheWrite1hTokens, u.CacheWriteTokens))
	rate1h := p.CacheWrite1h
	if rate1h == 0 {
		rate1h = p.CacheWrite
	}
	return (float64(u.InputTokens)*p.Input +
		float64(u.OutputTokens)*p.Output +
		float64(u.CacheWriteTokens-w1h)*p.CacheWrite +
		float64(w1h)*rate1h +
		float64(u.CacheReadTokens)*p.CacheRead) / 1e6
}

// Table holds prices by model, keyed as deputy names models:
// provider:model ("anthropic:claude-haiku-4-5"), or a bare name.
type Table map[string]Price

// Lookup finds model's price. Its exact key wins; otherwise the closest
// entry by these rules, in order (see matchScore):
//   - the model's own name before its family (a dated snapshot such as
//     "claude-sonnet-4-5-20250929" or "gpt-5-mini-2025-08-07", or a
//     "-latest" alias, finds its model's row, and a row keyed by one
//     snapshot prices the others);
//   - the same provider, then a bare key (one entry can price a model
//     reached through several providers), then, for a bare name as
//     requests carry it, a provider:model entry; a key naming another
//     provider is never used.
//
// Two best entries with different prices are ambiguous (a bare name priced
// by two providers), so neither is used.
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	qp, qm := splitName(model)
	qf := family(qm)
	var found Price
	best, ambiguous := 0, false
	for k, p := range t {
		switch s := matchScore(qp, qm, qf, k); {
		case s > best:
			found, best, ambiguous = p, s, false
		case s == best && s > 0 && p != found:
			ambiguous = true
		}
	}
	if best == 0 || ambiguous {
		return Price{}, false
	}
	return found, true
}

// With is t with over's entries laid over it, as deputy.yaml's prices are
// over the built-in table: an entry of over replaces every entry of t it
// shadows (the same model family, and the same provider or none), so
// deputy.yaml's "claude-sonnet-4-5" wins over the built-in
// "anthropic:claude-sonnet-4-5" and its dated ids, whatever Lookup would
// prefer between them. Neither table is changed.
func (t Table) With(over Table) Table {
	out := make(Table, len(t)+len(over))
	for k, p := range t {
		out[k] = p
	}
	for o := range over {
		for k := range out {
			if shadows(o, k) {
				delete(out, k)
			}
		}
	}
	for o, p := range over {
		out[o] = p
	}
	return out
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
