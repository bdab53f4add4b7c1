package benchsub

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The workloads at small sizes: fast, but every figure is computed from a
// real run, and checked against what the workload's design makes true.

func TestPrefixOf(t *testing.T) {
	t.Parallel()
	// The markers sit on different blocks in the two requests, as they do
	// from one turn to the next; they must not count as a difference.
	prev := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"a","input_schema":{}}],"messages":[{"role":"user","content":[{"type":"text","text":"hello","cache_control":{"type":"ephemeral"}}]}]}`
	child := `{"model":"m","max_tokens":99,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"a","input_schema":{}}],"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]},` +
		`{"role":"assistant","content":[{"cache_control":{"type":"ephemeral"},"type":"text","text":"hi"}]}]}`
	p, err := PrefixOf("anthropic", []byte(prev), []byte(child))
	if err != nil {
		t.Fatal(err)
	}
	// model, tool, system, user block match; the assistant block does not.
	if p.MatchingElements != 4 || p.Elements != 5 {
		t.Fatalf("anthropic prefix %+v", p)
	}
	want := len(`"m"`) + len(`{"name":"a","input_schema":{}}`) + len(`{"type":"text","text":"sys"}`) + len(`user:{"type":"text","text":"hello"}`)
	if p.Matching != want || p.Total != want+len(`assistant:{"type":"text","text":"hi"}`) {
		t.Errorf("anthropic bytes %d/%d, want %d/%d", p.Matching, p.Total, want, want+len(`assistant:{"type":"text","text":"hi"}`))
	}
	// Another model shares nothing, even with the same content.
	other := strings.Replace(child, `"model":"m"`, `"model":"n"`, 1)
	if p, _ := PrefixOf("anthropic", []byte(prev), []byte(other)); p.Matching != 0 || p.Share() != 0 {
		t.Errorf("another model: %+v", p)
	}
	// One differing element ends the prefix even if later ones agree.
	sysChanged := strings.Replace(child, `"text":"sys"`, `"text":"SYS"`, 1)
	if p, _ := PrefixOf("anthropic", []byte(prev), []byte(sysChanged)); p.MatchingElements != 2 {
		t.Errorf("changed system: %+v", p)
	}
	oprev := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello"}],"tools":[{"type":"function","function":{"name":"a"}}]}`
	ochild := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello"},{"role":"user","content":"more"}],"tools":[{"type":"function","function":{"name":"a"}}],"stream":true}`
	p, err = PrefixOf("openai", []byte(oprev), []byte(ochild))
	if err != nil {
		t.Fatal(err)
	}
	if p.MatchingElements != 4 || p.Elements != 5 || p.Share() <= 0.5 || p.Share() >= 1 {
		t.Errorf("openai prefix %+v", p)
	}
	if _, err := PrefixOf("openai", []byte(oprev), []byte(`{"model":`)); err == nil {
		t.Error("a broken body must be an error")
	}
}

func TestEconomy(t *testing.T) {
	t.Parallel()
	c := EconomyConfig{Children: 3, Parts: 2, PartBytes: 6000, ReportChars: 5000, SummaryChars: 1200, MinCacheTokens: 256}
	for _, wire := range Wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			r, err := Economy(context.Background(), wire, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", *r)
			if len(r.IntoParent) != c.Children || r.ChildRequests != 3*c.Children {
				t.Fatalf("result %+v", r)
			}
			// The log and the server's usage count the same prompts (on the
			// OpenAI wire, a few tokens more per request: see the field).
			diff := r.ChildPromptByUsage - r.ChildPromptByLog
			if (wire == "anthropic" && diff != 0) || diff < 0 || diff > r.ChildPromptByLog/100 {
				t.Errorf("children's prompt tokens: %d by the log, %d by usage", r.ChildPromptByLog, r.ChildPromptByUsage)
			}
			// The child wrote 5000 characters; the relay asked for a summary
			// within the cap, and the parent got that, with a short header.
			if r.ChildReportChars != c.ReportChars || r.RelayedReportChars != c.SummaryChars {
				t.Errorf("report %d chars, relayed %d", r.ChildReportChars, r.RelayedReportChars)
			}
			for i, n := range r.IntoParent {
				if n < c.SummaryChars/4 || n > c.SummaryChars/4+100 {
					t.Errorf("child %d: %d tokens into the parent for a %d-character summary", i, n, c.SummaryChars)
				}
			}
			if r.DeltaPerChild < float64(r.MaxIntoParent)*0.9 || r.DeltaPerChild > float64(r.MaxIntoParent)+100 {
				t.Errorf("delta per child %.0f against %d", r.DeltaPerChild, r.MaxIntoParent)
			}
			// Each child read both parts: line numbers make the result a
			// little larger than the files.
			if lo := c.Parts * c.PartBytes / 4; r.ChildReadTokens < lo || r.ChildReadTokens > lo*12/10 {
				t.Errorf("a child read %d tokens, want about %d", r.ChildReadTokens, lo)
			}
			if r.Ratio <= 1 || r.ChildTokens <= r.ParentTokens {
				t.Errorf("children %d tokens, parent %d: ratio %.1f", r.ChildTokens, r.ParentTokens, r.Ratio)
			}
		})
	}
}

func TestForkReuse(t *testing.T) {
	t.Parallel()
	c := ForkConfig{Parts: 2, PartBytes: 12_000, MinCacheTokens: 256}
	for _, wire := range Wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			r, err := ForkReuse(context.Background(), wire, c)
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(r)
			t.Logf("%s", js)
			labels := map[string]ForkChild{}
			for _, ch := range r.Children {
				labels[ch.Label] = ch
			}
			for _, l := range []string{"fork-1", "fork-2", "fork-2b", "isolated-2", "fork-3"} {
				if _, ok := labels[l]; !ok {
					t.Fatalf("no child %s in %+v", l, r.Children)
				}
			}
			// An isolated child shares the model and the first tool
			// definition (read_file leads both tool lists), not much more,
			// and reads nothing from the cache.
			iso := labels["isolated-2"]
			if iso.Mode != agentdef.ModeIsolated || iso.PrefixElems > 2 || iso.PrefixShare > 0.5 || iso.CacheRead != 0 {
				t.Errorf("an isolated child shares its parent's prefix: %+v", iso)
			}
			for _, ch := range r.Children {
				if ch.Mode != agentdef.ModeFork {
					continue
				}
				if ch.FirstResponse != (ch.Label == "fork-1") || ch.ParentTurn < 1 {
					t.Errorf("%s: parent turn %d, first response %v", ch.Label, ch.ParentTurn, ch.FirstResponse)
				}
				// The child's own additions (the spawning turn's rest and
				// the task) are never a prefix of anything the parent sent.
				if ch.PrefixShare >= 1 || ch.PrefixBytes >= ch.RequestBytes {
					t.Errorf("%s: prefix %d of %d bytes", ch.Label, ch.PrefixBytes, ch.RequestBytes)
				}
				if ch.FirstResponse {
					continue
				}
				if ch.PrefixShare < 0.8 || ch.CacheShare < 0.7 || ch.CacheRead > int64(ch.ParentTokens) {
					t.Errorf("%s: prefix %.3f, cache reads %d of %d (parent's prompt %d)", ch.Label, ch.PrefixShare, ch.CacheRead, ch.PromptTokens, ch.ParentTokens)
				}
			}
			// The longer the parent's transcript, the larger the share.
			if labels["fork-3"].PrefixShare <= labels["fork-2"].PrefixShare {
				t.Errorf("fork-3 %.3f <= fork-2 %.3f", labels["fork-3"].PrefixShare, labels["fork-2"].PrefixShare)
			}
			if r.MinPrefixShare > labels["fork-2"].PrefixShare || r.MinCacheShare <= 0 {
				t.Errorf("minimums %.3f %.3f", r.MinPrefixShare, r.MinCacheShare)
			}
		})
	}
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	// The latency is real time (this is a wall-time benchmark), kept small.
	// No figure here depends on the machine's speed except through the
	// lower bound: with at most MaxParallel workers at once, each turn
	// taking at least the latency, no run can beat the ideal.
	c := FanOutConfig{Children: 7, Turns: 3, MaxParallel: 3, Latency: 20 * time.Millisecond}
	for _, wire := range Wires {
		for _, via := range FanOutVias {
			t.Run(wire+"/"+via, func(t *testing.T) {
				t.Parallel()
				r, err := FanOut(context.Background(), wire, via, c)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%+v", *r)
				if r.PeakRunning != c.MaxParallel {
					t.Errorf("%d workers ran at once, want %d", r.PeakRunning, c.MaxParallel)
				}
				if r.Ideal != c.Ideal(via) || r.Ratio < 1 || r.Wall < r.Ideal {
					t.Errorf("wall %v, ideal %v, ratio %.3f", r.Wall, r.Ideal, r.Ratio)
				}
				if via == ViaDeputy {
					// The phases hold the same bound: each root turn waits
					// for one response, the children for the loops' ideal.
					if r.RootFirst < c.Latency || r.RootSecond < c.Latency || r.Children < c.Ideal(ViaBareSDK) ||
						r.RootFirst+r.Children+r.RootSecond > r.Wall {
						t.Errorf("phases %v + %v + %v, wall %v", r.RootFirst, r.Children, r.RootSecond, r.Wall)
					}
				} else if r.RootFirst+r.Children+r.RootSecond != 0 {
					t.Errorf("a loop has no root, but phases %v %v %v", r.RootFirst, r.Children, r.RootSecond)
				}
			})
		}
	}
	if _, err := FanOut(context.Background(), "openai", "nope", c); err == nil || !strings.Contains(err.Error(), "unknown fan-out via") {
		t.Errorf("unknown via: %v", err)
	}
}
