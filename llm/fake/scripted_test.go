package fake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// assembled is one content block rebuilt from deltas.
type assembled struct {
	typ, id, name, text string
	deltas              int
}

// record returns a stream callback and the blocks it rebuilds. It also
// checks that block indexes never go back.
func record(t *testing.T) (func(llm.Delta), *[]*assembled, *int) {
	var blocks []*assembled
	bytes := 0
	last := -1
	return func(d llm.Delta) {
		if d.Index < last {
			t.Errorf("delta for block %d after block %d", d.Index, last)
		}
		last = d.Index
		for len(blocks) <= d.Index {
			blocks = append(blocks, nil)
		}
		b := blocks[d.Index]
		if b == nil {
			b = &assembled{typ: d.Type, id: d.ID, name: d.Name}
			blocks[d.Index] = b
		} else if d.ID != "" || d.Name != "" {
			t.Errorf("ID/Name repeated on a later delta of block %d", d.Index)
		}
		if d.Type != b.typ {
			t.Errorf("block %d changes type %s → %s", d.Index, b.typ, d.Type)
		}
		b.text += d.Text
		b.deltas++
		bytes += len(d.Text)
	}, &blocks, &bytes
}

func TestStreamReassemblesToResponse(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - thinking: "Weighing the options for {{.Task}}."
    text: "Here is a longer answer — with ünïcödé — so it streams in several fragments: {{lorem 300}}"
    tool_calls:
      - name: read_file
        input: {path: "docs/a.md", limit: 20}
      - name: spawn_subagent
        repeat: 2
        input: {task: "part {{.I}}: {{.Task}}", notes: ["x", "y"]}
`)
	m := NewModel(s)
	stream, blocks, _ := record(t)
	req := atTurn("ship the feature", 1)
	resp, err := m.Generate(context.Background(), req, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(*blocks) != len(resp.Content) || len(resp.Content) != 5 {
		t.Fatalf("%d streamed blocks, %d in response", len(*blocks), len(resp.Content))
	}
	for i, b := range resp.Content {
		a := (*blocks)[i]
		switch b.Type {
		case "thinking":
			var th struct{ Thinking string }
			_ = json.Unmarshal(b.Raw, &th)
			if a.typ != "thinking" || a.text != th.Thinking || th.Thinking != "Weighing the options for ship the feature." {
				t.Errorf("thinking: streamed %q, block %s", a.text, b.Raw)
			}
		case llm.TypeText:
			if a.text != b.Text || a.deltas < 3 || !utf8.ValidString(a.text) {
				t.Errorf("text: %d deltas, streamed %q", a.deltas, a.text)
			}
		case llm.TypeToolUse:
			if a.id != b.ID || a.name != b.Name || a.text != string(b.Input) || a.deltas < 2 {
				t.Errorf("tool_use %d: streamed %+v, block %+v", i, a, b)
			}
			if !json.Valid(b.Input) {
				t.Errorf("invalid input %s", b.Input)
			}
		}
	}
	if got := string(resp.Content[3].Input); got != `{"task":"part 1: ship the feature","notes":["x","y"]}` {
		t.Errorf("input %s", got)
	}
	if resp.StopReason != llm.StopToolUse || resp.Model != "claude-test" || !strings.HasPrefix(resp.ID, "msg_") {
		t.Errorf("response %+v", resp)
	}

	// Without a stream, the same response.
	again, err := NewModel(s).Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(resp)
	jb, _ := json.Marshal(again)
	if string(ja) != string(jb) {
		t.Errorf("streamed and unstreamed responses differ:\n%s\n%s", ja, jb)
	}
}

func TestFragmentsCoverTheString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "short", strings.Repeat("é", 40), strings.Repeat("x", 1000)} {
		var parts []string
		_ = fragments(s, func(p string) error { parts = append(parts, p); return nil })
		if strings.Join(parts, "") != s || len(parts) < 1 || len(parts) > 4 {
			t.Errorf("%q → %q", s, parts)
		}
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Errorf("fragment %q cuts a rune", p)
			}
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - match: {turn: 1}
    text: "abcdefgh"
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - usage: {input_tokens: 1, output_tokens: 2, cache_read_tokens: 3, cache_write_tokens: 4}
    text: done
`)
	m := NewModel(s)
	req := atTurn("count my tokens", 1)
	req.Tools = tools("glob")
	resp, err := m.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := llm.EstimateTokens("abcdefgh") + llm.EstimateTokens("glob") + llm.EstimateTokens(`{"pattern":"*"}`)
	if resp.Usage != (llm.Usage{InputTokens: int64(llm.EstimateRequest(req)), OutputTokens: int64(wantOut)}) {
		t.Errorf("usage %+v, want input %d output %d", resp.Usage, llm.EstimateRequest(req), wantOut)
	}
	resp, err = m.Generate(context.Background(), atTurn("x", 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (llm.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4}) {
		t.Errorf("override %+v", resp.Usage)
	}
	if m.Requests() != 2 {
		t.Errorf("requests %d", m.Requests())
	}
}

func TestNilScenarioModel(t *testing.T) {
	t.Parallel()
	resp, err := NewModel(nil).Generate(context.Background(), atTurn("hi", 1), nil)
	if err != nil || len(resp.Content) != 1 || resp.Content[0].Text != DefaultText {
		t.Fatalf("%+v %v", resp, err)
	}
	if _, err := NewModel(nil).Generate(context.Background(), nil, nil); err == nil {
		t.Error("nil request accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewModel(nil).Generate(ctx, atTurn("hi", 1), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestFaultsBecomeErrors(t *testing.T) {
	t.Parallel()
	const text = "0123456789abcdefghijklmnopqrstuvwxyz" // 36 bytes
	cases := []struct {
		fault    string
		status   int
		typ      string
		retry    time.Duration
		streamed int // bytes of deltas before the error; -1: no stream expected
		check    func(error) bool
	}{
		{"{kind: rate_limit, retry_after: 3s}", 429, "rate_limit_error", 3 * time.Second, 0, nil},
		{"{kind: overloaded}", 529, "overloaded_error", 0, 0, nil},
		{"{kind: server_error}", 500, "api_error", 0, 0, nil},
		{"{kind: error_event, after_bytes: 10}", 529, "overloaded_error", 0, 10, nil},
		{"{kind: cut_stream, after_bytes: 10}", 0, "", 0, 10, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"{kind: cut_stream}", 0, "", 0, len(text) / 2, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"{kind: cut_stream, after_bytes: 1000}", 0, "", 0, len(text), func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"{kind: malformed_json}", 0, "", 0, 0, func(err error) bool {
			var se *json.SyntaxError
			return errors.As(err, &se)
		}},
	}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "rules:\n  - text: "+text+"\n    fault: "+c.fault+"\n")
			for _, withStream := range []bool{true, false} {
				stream, _, bytes := record(t)
				if !withStream {
					stream = nil
				}
				resp, err := NewModel(s).Generate(context.Background(), atTurn("x", 1), stream)
				if err == nil || resp != nil {
					t.Fatalf("no error: %+v", resp)
				}
				if c.check != nil {
					if !c.check(err) {
						t.Errorf("error %v (%T)", err, err)
					}
				} else {
					var ae *llm.APIError
					if !errors.As(err, &ae) || ae.StatusCode != c.status || ae.Type != c.typ || ae.RetryAfter != c.retry || !ae.Temporary() {
						t.Errorf("error %#v", err)
					}
				}
				if withStream && *bytes != c.streamed {
					t.Errorf("streamed %d bytes before the error, want %d", *bytes, c.streamed)
				}
			}
		})
	}
}

type result struct {
	resp *llm.Response
	err  error
}

func TestLatencyOnFakeClock(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
latency: {first_byte: 200ms, per_token: 10ms}
rules:
  - text: "twelve bytes"
`)
	c := clock.NewFake(time.Unix(0, 0))
	m := NewModel(s, WithModelClock(c))
	done := make(chan result, 1)
	go func() {
		resp, err := m.Generate(context.Background(), atTurn("x", 1), nil)
		done <- result{resp, err}
	}()
	notDone := func(when string) {
		t.Helper()
		select {
		case r := <-done:
			t.Fatalf("returned %s: %+v", when, r)
		default:
		}
	}
	waitTimers(t, c, 1)
	c.Advance(199 * time.Millisecond)
	notDone("before the first byte")
	c.Advance(time.Millisecond)
	// Then the output, 3 tokens at 10ms, as one wait.
	waitTimers(t, c, 1)
	c.Advance(29 * time.Millisecond)
	notDone("before the last token")
	c.Advance(time.Millisecond)
	r := <-done
	if r.err != nil || r.resp.Content[0].Text != "twelve bytes" {
		t.Fatalf("%+v", r)
	}
}

func TestStreamLatencySpreadsOverDeltas(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
latency: {first_byte: 50ms, per_token: 1ms}
rules:
  - text: "{{lorem 200}}"
    tool_calls: [{name: a, input: {q: "{{lorem 40}}"}}]
`)
	c := clock.NewFake(time.Unix(0, 0))
	m := NewModel(s, WithModelClock(c))
	var mu sync.Mutex
	var deltas []llm.Delta
	var at []time.Duration
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = m.Generate(context.Background(), atTurn("x", 1), func(d llm.Delta) {
			mu.Lock()
			defer mu.Unlock()
			deltas = append(deltas, d)
			at = append(at, c.Now().Sub(time.Unix(0, 0)))
		})
	}()
	driveClock(t, c, time.Millisecond, done)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Each delta arrives after the first byte plus the tokens so far.
	want := 50 * time.Millisecond
	for i, d := range deltas {
		want += time.Duration(llm.EstimateTokens(d.Text)+llm.EstimateTokens(d.Name)) * time.Millisecond
		if at[i] != want {
			t.Fatalf("delta %d (%q) at %v, want %v", i, d.Text, at[i], want)
		}
	}
	if len(deltas) < 5 {
		t.Errorf("only %d deltas", len(deltas))
	}
}

func TestSlowFirstByteAndCancel(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "rules:\n  - text: hi\n    fault: {kind: slow_first_byte, delay: 300ms}\n")
	c := clock.NewFake(time.Unix(0, 0))
	m := NewModel(s, WithModelClock(c))
	done := make(chan result, 1)
	go func() {
		resp, err := m.Generate(context.Background(), atTurn("x", 1), nil)
		done <- result{resp, err}
	}()
	waitTimers(t, c, 1)
	c.Advance(299 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("returned early: %+v", r)
	default:
	}
	c.Advance(time.Millisecond)
	if r := <-done; r.err != nil || r.resp.Content[0].Text != "hi" {
		t.Fatalf("%+v", r)
	}

	// Cancelling the context ends the wait and stops the timer.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		resp, err := m.Generate(ctx, atTurn("x", 1), nil)
		done <- result{resp, err}
	}()
	waitTimers(t, c, 1)
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%+v", r)
	}
	if c.Pending() != 0 {
		t.Errorf("%d timers left behind", c.Pending())
	}
}

func TestWithoutLatency(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "latency: {first_byte: 1h, per_token: 1h}\nrules:\n  - text: quick\n    fault: {kind: slow_first_byte, delay: 1h}\n")
	// The real clock: with latency this would take hours.
	resp, err := NewModel(s, WithoutLatency()).Generate(context.Background(), atTurn("x", 1), func(llm.Delta) {})
	if err != nil || resp.Content[0].Text != "quick" {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestModelConcurrentUse(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - match: {turn: 1}
    tool_calls: [{name: a, repeat: 3, input: {i: "{{.I}}", task: "{{.Task}}"}}]
  - text: "done with {{.Task}}"
`)
	m := NewModel(s)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				task := strings.Repeat("t", w+1)
				stream, blocks, _ := record(t)
				resp, err := m.Generate(context.Background(), atTurn(task, 1+i%2), stream)
				if err != nil {
					t.Error(err)
					return
				}
				if len(*blocks) != len(resp.Content) {
					t.Errorf("streamed %d blocks of %d", len(*blocks), len(resp.Content))
				}
				if i%2 == 1 && resp.Content[0].Text != "done with "+task {
					t.Errorf("%q", resp.Content[0].Text)
				}
			}
		})
	}
	wg.Wait()
	if m.Requests() != 400 {
		t.Errorf("%d requests", m.Requests())
	}
}
