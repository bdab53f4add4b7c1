// Package providertest is the end-to-end suite every real provider passes:
// the provider's model, on its official SDK, talks over loopback HTTP to the
// fake model API (package llm/fake), streaming and not, through multi-turn
// tool use, parallel tool calls, thinking blocks, every fault the fake can
// inject, prompt caching, and a 20% random fault rate over 200 runs.
//
// A provider's own test calls Run with a Target describing how to build it
// and what its wire does differently (as database drivers share one
// conformance suite).
package providertest

import (
	"context"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/retry"
)

// Config is what the suite asks a Target to build a model with.
type Config struct {
	// RootURL is the fake server's root, such as http://127.0.0.1:41234.
	RootURL string
	APIKey  string
	Policy  retry.Policy
	// NonStreaming asks for the non-streaming endpoint when Generate gets no
	// stream callback.
	NonStreaming bool
	// CacheTTL is the breakpoint lifetime (Anthropic); zero is the default.
	CacheTTL time.Duration
}

// Target is a provider under test.
type Target struct {
	// Name is the provider name its errors and attempts carry.
	Name string
	// Wire is the protocol it speaks.
	Wire fake.Provider
	// New builds the model under test.
	New func(cfg Config) (llm.Model, error)
	// Opaque reports that the wire carries opaque blocks (thinking) both
	// ways; otherwise they are dropped from requests and never appear in
	// responses.
	Opaque bool
	// Breakpoints reports that the provider places cache_control markers.
	Breakpoints bool
	// RawInput reports that tool inputs travel as raw JSON in the request
	// body (Anthropic), so the body must contain their exact bytes. On
	// OpenAI they travel as a JSON string, whose decoded value is checked.
	RawInput bool
	// OverloadedStatus is the status of an overloaded answer (529 or 503).
	OverloadedStatus int
	// StopReasons maps a stop reason the fake is told to give to the one
	// the provider must report.
	StopReasons map[llm.StopReason]llm.StopReason
	// UsageOf maps usage the fake is told to report to what the provider
	// must return.
	UsageOf func(llm.Usage) llm.Usage
	// CacheRead is the cache read a turn must report, given the whole
	// prompt of the turn before it, when the simulator computes usage.
	CacheRead func(prevPrompt int64) int64
	// CacheWrites reports that the wire reports cache writes.
	CacheWrites bool
	// NoStopSequences reports that the wire has no stop sequences (the
	// Responses API): the tool loop sends none, and expects none on the
	// wire.
	NoStopSequences bool
	// Reasoning reports that the wire carries thinking as reasoning items
	// (the Responses API): a thinking block the fake is told to give
	// comes back as an opaque block of type reasoning, whose JSON (ids,
	// encrypted_content) the fake makes up and which must go back byte
	// for byte; redacted thinking has no form there. Opaque must be set
	// too.
	Reasoning bool
	// StreamPreamble is how many bytes, at most, a stream sends before its
	// first delta beyond what the other wires do (the Responses API's
	// response.created and response.in_progress each echo the request's
	// settings and tools): a fault that must cut a stream after some
	// deltas trips that much later.
	StreamPreamble int
}

// mode is one way of calling Generate.
type mode struct {
	name string
	// callback passes a stream callback to Generate.
	callback bool
	// nonStreaming builds the model with Config.NonStreaming.
	nonStreaming bool
}

var modes = []mode{
	{name: "stream", callback: true},
	{name: "buffered"},                  // streams on the wire, no callback
	{name: "plain", nonStreaming: true}, // the non-streaming endpoint
}

// Key is the API key the suite's servers require.
const Key = "sk-test-key-providertest-0123456789"

// Run runs the suite against tg.
func Run(t *testing.T, tg Target) {
	t.Run("ToolLoop", func(t *testing.T) { t.Parallel(); forModes(t, tg, testToolLoop) })
	t.Run("PromptCache", func(t *testing.T) { t.Parallel(); testPromptCache(t, tg) })
	t.Run("Thinking", func(t *testing.T) { t.Parallel(); forModes(t, tg, testThinking) })
	t.Run("Faults", func(t *testing.T) { t.Parallel(); forModes(t, tg, testFaults) })
	t.Run("FatalErrors", func(t *testing.T) { t.Parallel(); testFatalErrors(t, tg) })
	t.Run("StopReasons", func(t *testing.T) { t.Parallel(); forModes(t, tg, testStopReasons) })
	t.Run("Cancel", func(t *testing.T) { t.Parallel(); testCancel(t, tg) })
	t.Run("SlowFirstByte", func(t *testing.T) { t.Parallel(); testSlowFirstByte(t, tg) })
	t.Run("RandomFaults", func(t *testing.T) { t.Parallel(); forModes(t, tg, testRandomFaults) })
	t.Run("BadArguments", func(t *testing.T) { t.Parallel(); forModes(t, tg, testBadArguments) })
}

func forModes(t *testing.T, tg Target, f func(t *testing.T, tg Target, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, tg, m)
		})
	}
}

// fastPolicy retries at once and honours retry-after on an instant clock.
func fastPolicy(clk *clock.Instant) retry.Policy {
	p := retry.Default()
	p.BaseDelay = 0
	p.StallTimeout = 0
	p.Clock = clk
	return p
}

// build makes the model under test against root.
func build(t testing.TB, tg Target, m mode, root string, p retry.Policy) llm.Model {
	t.Helper()
	model, err := tg.New(Config{RootURL: root, APIKey: Key, Policy: p, NonStreaming: m.nonStreaming})
	if err != nil {
		t.Fatalf("new %s model: %v", tg.Name, err)
	}
	return model
}

// call runs Generate in mode m. With a callback, it rebuilds the response
// from the deltas, dropping them when an attempt reports Discarded, and
// checks the rebuild against the response.
func call(t testing.TB, ctx context.Context, model llm.Model, m mode, req *llm.Request, atts *Attempts) (*llm.Response, error) {
	t.Helper()
	if atts == nil {
		atts = &Attempts{}
	}
	if !m.callback {
		return model.Generate(atts.Context(ctx), req, nil)
	}
	var s streamed
	inner := atts.OnAttempt
	atts.OnAttempt = func(a llm.Attempt) {
		if a.Discarded {
			s.discard()
		}
		if inner != nil {
			inner(a)
		}
	}
	defer func() { atts.OnAttempt = inner }()
	resp, err := model.Generate(atts.Context(ctx), req, s.add)
	if err == nil {
		s.check(t, resp)
	}
	return resp, err
}
