package cost

import "maps"

// The built-in table: the providers' published list prices (Standard tier,
// USD per million tokens, prompts under any long-context threshold), so a
// run on a current Anthropic or OpenAI model has a cost without any
// configuration. deputy.yaml's prices lie over it (Table.With).
//
// Read on PricesRead from:
//   - Anthropic: https://platform.claude.com/docs/en/about-claude/pricing
//     ("Model pricing": base input, 5m and 1h cache writes, cache hits,
//     output) and, for the 5.x models, each model's page
//     https://platform.claude.com/docs/en/models/<model>/overview;
//   - OpenAI: https://developers.openai.com/api/docs/pricing and each
//     model's page https://developers.openai.com/api/docs/models/<model>
//     ("Text tokens": input, cached input, cache writes, output).
//
// Where a page gave a rule instead of a figure the row applies it and says
// so. The rows of models newer than the stored copy of a page (Fable and
// Mythos 5.2, Opus 5.5's cache rates, Sonnet 5.5's cut cache hits) were
// checked against the model pages and the changelogs quoting the pricing
// page. A model whose figures were not all published (gpt-5.5, gpt-5.4,
// gpt-5.4-mini, gpt-6.1-terra, gpt-6.2-astra, the GPT-4 models) has no row rather than a
// guessed one: its cost stays unknown and cost.Hint says how to price it.
const PricesRead = "2026-12-02"

// anthropic is a row of Anthropic's table: base input, 5-minute cache
// write, 1-hour cache write, cache hit, output. llm/anthropic reports the
// one-hour part of a call's cache writes (usage.cache_creation's
// ephemeral_1h_input_tokens) as llm.Usage.CacheWrite1hTokens, and Price.Of
// charges it at write1h. A deputy.yaml price gives it as cache_write_1h;
// one that leaves it out has its one-hour writes charged at cache_write.
func anthropic(in, write5m, write1h, hit, out float64) Price {
	return Price{Input: in, CacheWrite: write5m, CacheWrite1h: write1h, CacheRead: hit, Output: out}
}

// openAI is a row of OpenAI's table: input, cached input, cache write (0
// where the model bills none), output.
func openAI(in, cached, write, out float64) Price {
	return Price{Input: in, CacheRead: cached, CacheWrite: write, Output: out}
}

var builtin = []struct {
	provider string
	models   []string // the model's id first, then its aliases and snapshots
	price    Price
}{
	// Anthropic, from the pricing page's "Model pricing" table.
	{"anthropic", []string{"claude-fable-5-2", "claude-mythos-5-2"}, anthropic(8, 10, 16, 0.20, 40)},
	{"anthropic", []string{"claude-fable-5-1", "claude-mythos-5-1"}, anthropic(10, 12.50, 20, 0.25, 50)},
	{"anthropic", []string{"claude-fable-5", "claude-mythos-5"}, anthropic(10, 12.50, 20, 1, 50)},
	{"anthropic", []string{"claude-opus-5-5"}, anthropic(4, 5, 8, 0.20, 20)},
	{"anthropic", []string{"claude-opus-5", "claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6",
		"claude-opus-4-5", "claude-opus-4-5-20251101"}, anthropic(5, 6.25, 10, 0.50, 25)},
	{"anthropic", []string{"claude-opus-4-1", "claude-opus-4-1-20250805", "claude-opus-4-0",
		"claude-opus-4-20250514"}, anthropic(15, 18.75, 30, 1.50, 75)},
	// Sonnet 5.5's cache hits were cut from $0.20 to $0.10 on 2026-10-07.
	{"anthropic", []string{"claude-sonnet-5-5"}, anthropic(2, 2.50, 4, 0.10, 10)},
	{"anthropic", []string{"claude-sonnet-5"}, anthropic(2, 2.50, 4, 0.20, 10)},
	{"anthropic", []string{"claude-sonnet-4-6", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929",
		"claude-sonnet-4-0", "claude-sonnet-4-20250514"}, anthropic(3, 3.75, 6, 0.30, 15)},
	// Haiku 5.5 is priced by prompt length; this is the band up to 100,000
	// prompt tokens (longer prompts cost 5x: cost.Price has one band).
	{"anthropic", []string{"claude-haiku-5-5"}, anthropic(0.10, 0.125, 0.20, 0.01, 0.50)},
	{"anthropic", []string{"claude-haiku-4-5", "claude-haiku-4-5-20251001"}, anthropic(1, 1.25, 2, 0.10, 5)},

	// OpenAI, from each model's page. Prompts over 272K input tokens cost
	// more (2x input and cache, 1.5x output) on the GPT-5.6 and GPT-6
	// models; these are the short-context rates.
	{"openai", []string{"gpt-6-astra"}, openAI(10, 1, 12.50, 50)},
	{"openai", []string{"gpt-6.2-sol", "gpt-6.1-sol"}, openAI(2, 0.10, 2.50, 10)},
	{"openai", []string{"gpt-6-sol"}, openAI(2, 0.20, 2.50, 10)},
	{"openai", []string{"gpt-6-luna"}, openAI(0.10, 0.01, 0.125, 0.50)},
	// GPT-5.6: the pages state cache writes as 1.25x input; Sol's is its
	// promotional price, Terra's cached input the family's 0.1x of input.
	{"openai", []string{"gpt-5.6-sol", "gpt-5.6"}, openAI(4, 0.40, 5, 20)},
	{"openai", []string{"gpt-5.6-terra"}, openAI(2, 0.20, 2.50, 12)},
	{"openai", []string{"gpt-5.6-luna"}, openAI(0.20, 0.02, 0.25, 1.20)},
	{"openai", []string{"gpt-5.4-nano", "gpt-5.4-nano-2026-03-17"}, openAI(0.20, 0.02, 0, 1.25)},
	{"openai", []string{"gpt-5.1", "gpt-5.1-2025-11-13", "gpt-5", "gpt-5-2025-08-07"}, openAI(1.25, 0.125, 0, 10)},
	{"openai", []string{"gpt-5-mini", "gpt-5-mini-2025-08-07"}, openAI(0.25, 0.025, 0, 2)},
	{"openai", []string{"gpt-5-nano", "gpt-5-nano-2025-08-07"}, openAI(0.05, 0.005, 0, 0.40)},
}

// builtinTable is the built-in rows keyed provider:model, built once.
var builtinTable = func() Table {
	t := Table{}
	for _, r := range builtin {
		for _, m := range r.models {
			t[r.provider+":"+m] = r.price
		}
	}
	return t
}()

// Builtin is a copy of the price table shipped with deputy (see
// PricesRead), keyed provider:model; the caller may change it.
func Builtin() Table { return maps.Clone(builtinTable) }
