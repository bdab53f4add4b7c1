package llm

import "strings"

// EstimateTokens is deputy's one token-counting rule, used wherever a
// provider gives no count (compaction decisions before the first response,
// the fake server's usage, the prompt-cache simulator): one token per four
// bytes of UTF-8, rounded up. Real tokenizers average 3.5–4.5 bytes per token
// on English and code, so the rule errs slightly toward compacting early.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// EstimateOutput is the same rule applied to a response's output: the
// tokens a model generated for content, with no framing (providers count
// none in output). A text block costs EstimateTokens of its text, a tool
// call EstimateTokens of its name plus EstimateTokens of its arguments, and
// any other block (thinking, opaque) EstimateTokens of its raw JSON. The
// fake model reports this as output usage, in process and on both wires, and
// paces per-token latency by it, so the three always agree.
func EstimateOutput(content []Block) int {
	n := 0
	for i := range content {
		n += contentTokens(&content[i])
	}
	return n
}

// contentTokens is a block's tokens without framing: what EstimateOutput
// counts of it, and EstimateBlock counts on top of its framing.
func contentTokens(b *Block) int {
	switch b.Type {
	case TypeText, TypeToolResult:
		return EstimateTokens(b.Text)
	case TypeToolUse:
		return EstimateTokens(b.Name) + EstimateTokens(b.Arguments())
	}
	return EstimateTokens(string(b.Raw))
}

// perMessageTokens approximates the framing a provider adds around each
// message and block (role markers, separators).
const perMessageTokens = 4

// EstimateBlock estimates one block's tokens.
func EstimateBlock(b *Block) int { return perMessageTokens + contentTokens(b) }

// EstimateMessages estimates a transcript's tokens.
func EstimateMessages(msgs []Message) int {
	n := 0
	for i := range msgs {
		n += perMessageTokens
		for j := range msgs[i].Content {
			n += EstimateBlock(&msgs[i].Content[j])
		}
	}
	return n
}

// EstimateRequest estimates a whole request: system prompt, tools, messages.
func EstimateRequest(r *Request) int {
	n := EstimateTokens(r.System) + EstimateMessages(r.Messages)
	for i := range r.Tools {
		n += perMessageTokens + EstimateTokens(r.Tools[i].Name) +
			EstimateTokens(r.Tools[i].Description) + EstimateTokens(string(r.Tools[i].InputSchema))
	}
	return n
}

// contextWindows maps model-name prefixes to context windows in tokens, from
// the providers' model documentation. The longest matching prefix wins.
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"claude-", 200_000},
	{"gpt-4o", 128_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-5", 400_000},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"llama3.1", 128_000},
	{"llama3.2", 128_000},
	{"llama3", 8_192},
	{"qwen2.5", 32_768},
	{"qwen3", 40_960},
	{"mistral", 32_768},
	{"gemma3", 128_000},
	{"fake", 200_000},
}

// DefaultContextWindow is assumed for a model the table does not know.
const DefaultContextWindow = 128_000

// ContextWindow returns the context window of a model, in tokens. A provider
// prefix such as "anthropic:" is ignored.
func ContextWindow(model string) int {
	if i := strings.IndexByte(model, ':'); i >= 0 {
		model = model[i+1:]
	}
	best, n := -1, DefaultContextWindow
	for _, w := range contextWindows {
		if strings.HasPrefix(model, w.prefix) && len(w.prefix) > best {
			best, n = len(w.prefix), w.tokens
		}
	}
	return n
}
