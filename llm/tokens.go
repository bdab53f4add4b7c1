package llm

import (
	"strings"
	"unicode/utf8"
)

// EstimateTokens is deputy's one token-counting rule, used wherever a
// provider gives no count (compaction decisions before the first response,
// the fake server's usage, the prompt-cache simulator): ASCII at one token
// per four bytes, as real tokenizers average 3.5–4.5 bytes per token on
// English and code, and every other character at the rate of its script
// (see runeUnits), so Chinese, Greek or Hindi text is not undercounted 1.5–
// 2.5× as bytes/4 would. Rounded up; it allocates nothing.
func EstimateTokens(s string) int {
	units := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// ASCII eight bytes at a time: the common case, prose and code.
			if i+8 <= len(s) && ascii8(s, i) {
				units += 8 * asciiUnits
				i += 8
			} else {
				units += asciiUnits
				i++
			}
			continue
		}
		r, size := decodeRune(s, i)
		units += runeUnits(r, size)
		i += size
	}
	return (units + unitsPerToken - 1) / unitsPerToken
}

// decodeRune decodes the rune at s[i], not ASCII, inline for the two- and
// three-byte forms that non-Latin text is made of (utf8's decoder, called
// per rune, costs as much again), and through utf8 for the rest.
func decodeRune(s string, i int) (rune, int) {
	c := s[i]
	if c >= 0xC2 && c < 0xE0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
		return rune(c&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	}
	if c > 0xE0 && c < 0xF0 && c != 0xED && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s[i:])
}

// ascii8 reports whether the eight bytes of s at i are all ASCII. The
// loads combine into one 64-bit load.
func ascii8(s string, i int) bool {
	w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
	return w&0x8080808080808080 == 0
}

// EstimateTokens counts in twentieths of a token, so every rate below is
// a whole number and ASCII alone rounds exactly as ceil(bytes/4).
const (
	unitsPerToken = 20
	asciiUnits    = unitsPerToken / 4
)

// scriptUnits is what one non-ASCII character costs, in twentieths of a
// token, by script; a character in no range costs a token. The rates are
// measured: tokens per character of real prose in each script
// (llm/testdata/scripts, see its README) under OpenAI's cl100k_base
// (js-tiktoken 1.0.21) and Anthropic's published Claude tokenizer
// (@anthropic-ai/tokenizer 0.0.4), each rate within the two's range or a
// little under it (o200k_base counts fewer still): Han and kana 1.14–1.32
// tokens per character, Hangul 1.32–1.47, Devanagari 1.22–1.30, Greek
// 1.00–1.31, Arabic 0.80–1.06, Cyrillic 0.53–0.58.
// Accented Latin is rare in the samples; it keeps bytes/4's rate.
var scriptUnits = []struct {
	lo, hi rune // [lo, hi), multiples of 16
	units  uint8
}{
	{0x0080, 0x0370, 10}, // Latin-1, Latin Extended, IPA, combining marks
	{0x0370, 0x0400, 24}, // Greek
	{0x1F00, 0x2000, 24}, // Greek Extended
	{0x0400, 0x0530, 11}, // Cyrillic
	{0x0600, 0x0780, 19}, // Arabic
	{0x0900, 0x0E00, 24}, // the Brahmic scripts of India and Sri Lanka
	{0x1100, 0x1200, 28}, // Hangul Jamo
	{0x3130, 0x3190, 28}, // Hangul compatibility Jamo
	{0xAC00, 0xD7B0, 28}, // Hangul syllables
	{0x3040, 0x3100, 23}, // Hiragana, Katakana
	{0x3400, 0xA000, 23}, // Han
	{0xF900, 0xFB00, 23}, // Han compatibility
}

// bmpUnits is scriptUnits by blocks of 16 code points of the Basic
// Multilingual Plane, so a character's rate is one load, not a search.
var bmpUnits = func() (t [0x10000 >> 4]uint8) {
	for i := range t {
		t[i] = unitsPerToken
	}
	for _, s := range scriptUnits {
		for b := s.lo >> 4; b < s.hi>>4; b++ {
			t[b] = s.units
		}
	}
	return t
}()

// runeUnits is what the non-ASCII r, size bytes long, costs: its script's
// rate; two tokens above the Basic Multilingual Plane (emoji, rare Han);
// a token for a byte that is not UTF-8, as byte-level tokenizers spend one.
func runeUnits(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return unitsPerToken
	case r >= 0x10000:
		return 2 * unitsPerToken
	}
	return int(bmpUnits[r>>4])
}

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
