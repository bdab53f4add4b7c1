package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"pgregory.net/rapid"
)

func TestCapReport(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		limit    int
		want     string
		cut      bool
	}{
		{"under", "hello", 10, "hello", false},
		{"exact", "hello", 5, "hello", false},
		{"empty", "", 3, "", false},
		{"no limit", "hello", 0, "hello", false},
		{"negative limit", "hello", -1, "hello", false},
		{"ascii cut", "hello world", 5, "hello" + cutMarker(6), true},
		// Runes, not bytes: "é" is 2 bytes and "世" 3, each one character.
		{"multibyte exact", "héllo世", 6, "héllo世", false},
		{"multibyte cut", "héllo世界", 6, "héllo世" + cutMarker(1), true},
		{"emoji", "🙂🙂🙂", 1, "🙂" + cutMarker(2), true},
		{"invalid utf8", "a\xffb", 5, "a\uFFFDb", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, cut := CapReport(c.in, c.limit)
			if got != c.want || cut != c.cut {
				t.Fatalf("CapReport(%q, %d) = %q, %v; want %q, %v", c.in, c.limit, got, cut, c.want, c.cut)
			}
		})
	}
	got, _ := CapReport(strings.Repeat("x", 10_000), 3000)
	if !strings.Contains(got, "7000 more characters") || !strings.Contains(got, "instance id") {
		t.Fatalf("marker does not say what was cut and where the rest is: %q", got[3000:])
	}
}

func TestCapReportProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		// Arbitrary bytes, so invalid UTF-8 and split sequences are drawn too.
		in := rapid.OneOf(
			rapid.String(),
			rapid.StringOf(rapid.RuneFrom([]rune{'a', 'é', '世', '🙂', '\n'})),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
		).Draw(t, "report")
		limit := rapid.IntRange(-2, 60).Draw(t, "limit")
		out, cut := CapReport(in, limit)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8: %q", out)
		}
		clean := strings.ToValidUTF8(in, "\uFFFD") // a run of invalid bytes becomes one U+FFFD
		runes := utf8.RuneCountInString(clean)
		if !cut {
			if limit > 0 && runes > limit {
				t.Fatalf("%d runes over limit %d not cut", runes, limit)
			}
			if out != clean {
				t.Fatalf("uncut report changed: %q -> %q", in, out)
			}
			return
		}
		marker := cutMarker(runes - limit)
		head, ok := strings.CutSuffix(out, marker)
		if !ok {
			t.Fatalf("cut report lacks marker %q: %q", marker, out)
		}
		if n := utf8.RuneCountInString(head); n != limit {
			t.Fatalf("head has %d runes, want %d", n, limit)
		}
		if !strings.HasPrefix(clean, head) {
			t.Fatalf("head %q is not the start of %q", head, in)
		}
	})
}

func TestNoReport(t *testing.T) {
	t.Parallel()
	for stop, want := range map[string]string{
		"max_tokens": "stop reason: max_tokens",
		"":           "stop reason: unknown",
	} {
		got := NoReport(stop)
		if !strings.Contains(got, "no report") || !strings.Contains(got, want) {
			t.Errorf("NoReport(%q) = %q, want it to contain %q", stop, got, want)
		}
	}
}

func TestRelayToolResultCompleted(t *testing.T) {
	t.Parallel()
	r := Relay{
		ID: "exp-1", Type: "explorer", State: "completed",
		Report:     "Conclusion: the bug is in parse.go.\n- sources: parse.go",
		StopReason: "end_turn",
		Artifacts:  []string{"notes.md"},
		Usage:      llm.Usage{InputTokens: 1200, CacheReadTokens: 40000, CacheWriteTokens: 0, OutputTokens: 900},
		ToolCalls:  7, Turns: 3, Duration: 12340 * time.Millisecond,
	}
	got, isErr := r.ToolResult()
	if isErr {
		t.Fatal("completed child rendered as an error")
	}
	want := "subagent exp-1 (explorer): completed, stop end_turn\n" +
		"usage: 3 turns, 7 tool calls, 41200 tokens in (40000 cached), 900 out, 12.3s\n" +
		"artifacts: notes.md\n" +
		"\n" +
		"Conclusion: the bug is in parse.go.\n- sources: parse.go"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRelayToolResultIncompleteNoReport(t *testing.T) {
	t.Parallel()
	r := Relay{ID: "c2", Type: "worker", State: "timed_out", Incomplete: true, StopReason: "hard_timeout", Report: "  \n"}
	got, isErr := r.ToolResult()
	if isErr {
		t.Fatal("a timed-out child with no error is not a failure")
	}
	for _, want := range []string{"c2 (worker): timed_out, incomplete, stop hard_timeout", NoReport("hard_timeout")} {
		if !strings.Contains(got, want) {
			t.Errorf("result lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "artifacts:") || strings.Contains(got, "error:") {
		t.Errorf("empty fields rendered:\n%s", got)
	}
}

func TestRelayToolResultFailed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		r       Relay
		wantErr string
	}{
		{"error and state", Relay{ID: "f1", State: instance.Failed, Error: "anthropic: 500 api_error: boom", Report: "partial: read 3 files"}, "error: anthropic: 500 api_error: boom"},
		{"error only", Relay{ID: "f2", State: "completed", Error: "tool loop"}, "error: tool loop"},
		{"state only", Relay{ID: "f3", State: instance.Failed}, "error: the subagent failed without an error message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, isErr := c.r.ToolResult()
			if !isErr {
				t.Fatalf("failed child not an error result:\n%s", got)
			}
			if !strings.Contains(got, c.wantErr) {
				t.Fatalf("result lacks %q:\n%s", c.wantErr, got)
			}
			// Never an empty body: the partial report or the no-report marker.
			_, body, _ := strings.Cut(got, "\n\n")
			if strings.TrimSpace(body) == "" {
				t.Fatalf("empty report in failure:\n%s", got)
			}
			if c.r.Report != "" && body != c.r.Report {
				t.Fatalf("report = %q, want %q", body, c.r.Report)
			}
		})
	}
}

func TestRelayToolResultArtifactsBounded(t *testing.T) {
	t.Parallel()
	var arts []string
	for i := range 25 {
		arts = append(arts, fmt.Sprintf("f%02d.go", i))
	}
	got, _ := Relay{ID: "w", State: "completed", Report: "done", Artifacts: arts}.ToolResult()
	if !strings.Contains(got, "f19.go and 5 more") || strings.Contains(got, "f20.go") {
		t.Fatalf("artifact list not bounded:\n%s", got)
	}
}

// TestRelayToolResultSmall checks the context-economy promise from the
// parent's side: with a report at the default cap, the whole tool result
// stays near 1,000 tokens.
func TestRelayToolResultSmall(t *testing.T) {
	t.Parallel()
	report, cut := CapReport(strings.Repeat("finding. ", 2000), agentdef.DefaultReportCap)
	if !cut {
		t.Fatal("report not cut")
	}
	got, _ := Relay{ID: "exp-9", Type: "explorer", State: "completed", Report: report, Turns: 12, ToolCalls: 30,
		Usage: llm.Usage{InputTokens: 40000, OutputTokens: 3000}}.ToolResult()
	if n := llm.EstimateTokens(got); n > 1000 {
		t.Fatalf("tool result is %d tokens, want <= 1000", n)
	}
}
