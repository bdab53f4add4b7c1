package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a model that plays a fixed list of responses and records the
// requests it saw (deep-copied message slices, since the loop reuses them).
type script struct {
	mu    sync.Mutex
	steps []func(req *llm.Request) (*llm.Response, error)
	reqs  []llm.Request
}

func (s *script) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	s.mu.Lock()
	n := len(s.reqs)
	cp := *req
	cp.Messages = append([]llm.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, cp)
	s.mu.Unlock()
	if n >= len(s.steps) {
		return nil, fmt.Errorf("script: unexpected request %d", n+1)
	}
	resp, err := s.steps[n](req)
	if resp != nil && stream != nil {
		for i, b := range resp.Content {
			stream(llm.Delta{Index: i, Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name})
		}
	}
	return resp, err
}

func (s *script) requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llm.Request(nil), s.reqs...)
}

func say(text string) func(*llm.Request) (*llm.Response, error) {
	return func(*llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: []llm.Block{llm.Text(text)}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil
	}
}

// call answers with tool calls given as name, input pairs.
func call(pairs ...string) func(*llm.Request) (*llm.Response, error) {
	return func(req *llm.Request) (*llm.Response, error) {
		var blocks []llm.Block
		for i := 0; i+1 < len(pairs); i += 2 {
			id := fmt.Sprintf("toolu_%d_%d", len(req.Messages), i/2)
			blocks = append(blocks, llm.ToolUse(id, pairs[i], json.RawMessage(pairs[i+1])))
		}
		return &llm.Response{Content: blocks, StopReason: llm.StopToolUse,
			Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil
	}
}

// fn is a test tool made of a function.
type fn struct {
	name     string
	readOnly bool
	schema   string
	run      func(ctx context.Context, input json.RawMessage) (string, error)
}

func (f fn) Spec() llm.ToolSpec {
	s := f.schema
	if s == "" {
		s = `{"type":"object"}`
	}
	return llm.ToolSpec{Name: f.name, Description: f.name, InputSchema: json.RawMessage(s)}
}
func (f fn) ReadOnly() bool { return f.readOnly }
func (f fn) Run(ctx context.Context, in json.RawMessage) (string, error) {
	return f.run(ctx, in)
}

func echo(name string, readOnly bool) fn {
	return fn{name: name, readOnly: readOnly, run: func(_ context.Context, in json.RawMessage) (string, error) {
		return name + ":" + string(in), nil
	}}
}

func task(s string) []llm.Message { return []llm.Message{llm.UserText(s)} }

// checkTranscript asserts the invariants a provider enforces: roles
// alternate starting with the user, and every tool_use is answered by a
// tool_result, in the same order, in the very next message.
func checkTranscript(t interface {
	Helper()
	Fatalf(string, ...any)
}, msgs []llm.Message) {
	t.Helper()
	for i, m := range msgs {
		want := llm.User
		if i%2 == 1 {
			want = llm.Assistant
		}
		if m.Role != want {
			t.Fatalf("message %d has role %s, want %s", i, m.Role, want)
		}
		uses := m.ToolUses()
		if len(uses) == 0 {
			continue
		}
		if i+1 >= len(msgs) {
			t.Fatalf("message %d: tool_use without a following message", i)
		}
		next := msgs[i+1].Content
		if len(next) < len(uses) {
			t.Fatalf("message %d: %d tool_use blocks, %d results", i, len(uses), len(next))
		}
		for j, u := range uses {
			if next[j].Type != llm.TypeToolResult || next[j].ToolUseID != u.ID {
				t.Fatalf("message %d: result %d is %+v, want a tool_result for %s", i+1, j, next[j], u.ID)
			}
		}
	}
}

func TestRunAnswersWithoutTools(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){say("done")}}
	res, err := Run(context.Background(), Config{Model: m, ModelName: "fake", System: "sys"}, task("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopCompleted || res.Answer != "done" || res.Turns != 1 || res.Usage.Total() != 15 {
		t.Fatalf("got %+v", res)
	}
	req := m.requests()[0]
	if req.System != "sys" || req.Model != "fake" || req.MaxTokens != DefaultMaxOutputTokens {
		t.Fatalf("request %+v", req)
	}
}

func TestToolInputBytesSurviveUntouched(t *testing.T) {
	t.Parallel()
	// Keys out of order and odd spacing: any decode/re-encode would change them.
	input := `{"z": 1,  "a":"<&>", "m":[3, 2]}`
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", input), say("ok")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	second := m.requests()[1]
	got := second.Messages[1].Content[0].Input
	if string(got) != input {
		t.Fatalf("tool input re-encoded: %s", got)
	}
	if r := second.Messages[2].Content[0]; r.Text != "echo:"+input || r.IsError {
		t.Fatalf("tool result %+v", r)
	}
	checkTranscript(t, res.Messages)
	if res.ToolCalls != 1 || res.Turns != 2 {
		t.Fatalf("got %+v", res)
	}
}

func TestReadOnlyCallsRunConcurrentlyResultsInOrder(t *testing.T) {
	t.Parallel()
	const n = 3
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	done := make([]chan struct{}, n+1)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[n])
	slow := fn{name: "slow", readOnly: true, schema: `{"type":"object","properties":{"i":{"type":"integer"}}}`,
		run: func(ctx context.Context, in json.RawMessage) (string, error) {
			var a struct{ I int }
			if err := json.Unmarshal(in, &a); err != nil {
				return "", err
			}
			arrived.Done()
			<-release
			<-done[a.I+1] // finish in reverse call order
			close(done[a.I])
			return fmt.Sprint("result ", a.I), nil
		}}
	go func() { arrived.Wait(); close(release) }() // only opens if all n run at once
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("slow", `{"i":0}`, "slow", `{"i":1}`, "slow", `{"i":2}`), say("ok")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(slow)}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	results := res.Messages[2].Content
	for i := range n {
		if results[i].Text != fmt.Sprint("result ", i) {
			t.Fatalf("result %d = %q", i, results[i].Text)
		}
	}
}

func TestCallsWithAWriteRunInOrderOneAtATime(t *testing.T) {
	t.Parallel()
	var running, maxRunning atomic.Int32
	var mu sync.Mutex
	var order []string
	track := func(name string, ro bool) fn {
		return fn{name: name, readOnly: ro, run: func(context.Context, json.RawMessage) (string, error) {
			if n := running.Add(1); n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			running.Add(-1)
			return name, nil
		}}
	}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("r1", `{}`, "w", `{}`, "r2", `{}`), say("ok")}}
	tools := tool.MustSet(track("r1", true), track("w", false), track("r2", true))
	if _, err := Run(context.Background(), Config{Model: m, Tools: tools}, task("go")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "r1,w,r2" || maxRunning.Load() != 1 {
		t.Fatalf("order %s, max concurrency %d", got, maxRunning.Load())
	}
}

func TestBadToolCallsBecomeErrorResultsAndTheLoopGoesOn(t *testing.T) {
	t.Parallel()
	strict := fn{name: "strict", readOnly: true,
		schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`,
		run:    func(context.Context, json.RawMessage) (string, error) { return "ran", nil }}
	boom := fn{name: "boom", run: func(context.Context, json.RawMessage) (string, error) { panic("kaboom") }}
	fails := fn{name: "fails", run: func(context.Context, json.RawMessage) (string, error) { return "", errors.New("disk on fire") }}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("nope", `{}`, "strict", `{"path":3}`, "strict", `{not json`, "boom", `{}`, "fails", `{}`, "strict", `{"path":"a"}`),
		say("recovered")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(strict, boom, fails)}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Messages[2].Content
	wants := []struct {
		isErr bool
		has   string
	}{{true, `unknown tool "nope"`}, {true, "invalid arguments for strict"}, {true, "not valid JSON"},
		{true, "kaboom"}, {true, "disk on fire"}, {false, "ran"}}
	for i, w := range wants {
		if r[i].IsError != w.isErr || !strings.Contains(r[i].Text, w.has) {
			t.Errorf("result %d = %+v, want error=%v containing %q", i, r[i], w.isErr, w.has)
		}
	}
	if res.StopReason != StopCompleted || res.Answer != "recovered" {
		t.Fatalf("got %+v", res)
	}
}

func TestToolOutputIsCapped(t *testing.T) {
	t.Parallel()
	big := fn{name: "big", readOnly: true, run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("x", 60_000), nil
	}}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("big", `{}`), say("ok")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(big)}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	out := res.Messages[2].Content[0].Text
	if len(out) != tool.DefaultOutputLimit || !strings.Contains(out, " of 60000 characters cut by deputy") {
		t.Fatalf("len %d, marker missing: %q", len(out), out)
	}
}

func loopForever(req *llm.Request) (*llm.Response, error) { return call("echo", `{}`)(req) }

func forever(n int) []func(*llm.Request) (*llm.Response, error) {
	s := make([]func(*llm.Request) (*llm.Response, error), n)
	for i := range s {
		s[i] = loopForever
	}
	return s
}

func TestLimitsEndTheRunWithTheirOwnStopReason(t *testing.T) {
	t.Parallel()
	tools := tool.MustSet(echo("echo", true))
	cases := []struct {
		name      string
		lim       Limits
		steps     []func(*llm.Request) (*llm.Response, error)
		stop      StopReason
		turns     int
		toolCalls int
	}{
		{"default turns", Limits{}, forever(40), StopMaxTurns, DefaultMaxTurns, DefaultMaxTurns},
		{"turns", Limits{MaxTurns: 3}, forever(10), StopMaxTurns, 3, 3},
		// 15 tokens a call; the third prompt (~21 estimated) would pass 40.
		{"total tokens", Limits{MaxTotalTokens: 40}, forever(10), StopMaxTotalTokens, 2, 2},
		{"total tokens cap a call's output", Limits{MaxTotalTokens: 100}, []func(*llm.Request) (*llm.Response, error){
			func(req *llm.Request) (*llm.Response, error) {
				if req.MaxTokens >= 100 || req.MaxTokens <= 0 {
					return nil, fmt.Errorf("max_tokens %d not capped by the budget", req.MaxTokens)
				}
				return &llm.Response{Content: []llm.Block{llm.Text("cut")}, StopReason: llm.StopMaxTokens}, nil
			}}, StopMaxTotalTokens, 1, 0},
		{"tool calls", Limits{MaxToolCalls: 4}, []func(*llm.Request) (*llm.Response, error){
			call("echo", `{}`, "echo", `{}`, "echo", `{}`), call("echo", `{}`, "echo", `{}`, "echo", `{}`)},
			StopMaxToolCalls, 2, 4},
		{"output tokens", Limits{MaxOutputTokens: 5}, []func(*llm.Request) (*llm.Response, error){
			func(req *llm.Request) (*llm.Response, error) {
				if req.MaxTokens != 5 {
					return nil, fmt.Errorf("max_tokens %d", req.MaxTokens)
				}
				return &llm.Response{Content: []llm.Block{llm.Text("cut he")}, StopReason: llm.StopMaxTokens}, nil
			}}, StopMaxOutputTokens, 1, 0},
		{"output tokens mid tool call", Limits{}, []func(*llm.Request) (*llm.Response, error){
			func(req *llm.Request) (*llm.Response, error) {
				r, _ := call("echo", `{"trunc`)(req)
				r.StopReason = llm.StopMaxTokens
				return r, nil
			}}, StopMaxOutputTokens, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := &script{steps: c.steps}
			res, err := Run(context.Background(), Config{Model: m, Tools: tools, Limits: c.lim}, task("go"))
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != c.stop || res.Turns != c.turns || res.ToolCalls != c.toolCalls {
				t.Fatalf("stop %s turns %d calls %d, want %s %d %d", res.StopReason, res.Turns, res.ToolCalls, c.stop, c.turns, c.toolCalls)
			}
			checkTranscript(t, res.Messages)
		})
	}
}

func TestWallTimeInterruptsABlockedToolWithoutSleeping(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	started := make(chan struct{})
	block := fn{name: "block", readOnly: false, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("block", `{}`)}}
	go func() { <-started; clk.Advance(time.Minute) }()
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(block), Clock: clk,
		Limits: Limits{WallTime: time.Minute}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopWallTime {
		t.Fatalf("stop %s", res.StopReason)
	}
	r := res.Messages[2].Content[0]
	if !r.IsError || !strings.Contains(r.Text, "wall-time limit") {
		t.Fatalf("result %+v", r)
	}
	checkTranscript(t, res.Messages)
}

func TestWallTimeCountsSlowModelCalls(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	slow := func(req *llm.Request) (*llm.Response, error) {
		clk.Advance(20 * time.Second) // the model call "took" 20 s
		return call("echo", `{}`)(req)
	}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){slow, slow, slow, slow}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true)), Clock: clk,
		Limits: Limits{WallTime: 50 * time.Second}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopWallTime || res.Turns != 3 {
		t.Fatalf("stop %s after %d turns", res.StopReason, res.Turns)
	}
}

func TestCancelAndModelErrorKeepPartialWork(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("echo", `{}`),
		func(*llm.Request) (*llm.Response, error) { cancel(); return nil, context.Canceled },
	}}
	res, err := Run(ctx, Config{Model: m, Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if !errors.Is(err, context.Canceled) || res.StopReason != StopCancelled || res.ToolCalls != 1 || len(res.Messages) != 3 {
		t.Fatalf("err %v, res %+v", err, res)
	}

	apiErr := &llm.APIError{Provider: "fake", StatusCode: 529, Type: "overloaded_error", Message: "busy"}
	m = &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("echo", `{}`), func(*llm.Request) (*llm.Response, error) { return nil, apiErr }}}
	res, err = Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true))}, task("go"))
	var got *llm.APIError
	if !errors.As(err, &got) || !strings.Contains(err.Error(), "turn 2") || res.StopReason != StopModelError || res.Usage.Total() != 15 {
		t.Fatalf("err %v, res %+v", err, res)
	}
}

func TestEventsArriveInOrder(t *testing.T) {
	t.Parallel()
	var kinds []string
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", `{}`, "echo", `{"x":1}`), say("ok")}}
	_, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true)), Stream: true,
		OnEvent: func(e Event) { kinds = append(kinds, fmt.Sprintf("%d%s", e.Turn, e.Kind)) }}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	want := "1turn_started 1model_delta 1model_delta 1model_response 1message 1tool_call 1tool_call 1tool_result 1tool_result " +
		"1message 2turn_started 2model_delta 2model_response 2message 2finished"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// recordingSteps wraps Direct and records what it was asked to run.
type recordingSteps struct {
	mu  sync.Mutex
	log []string
}

func (s *recordingSteps) Model(ctx context.Context, turn int, p StepPurpose, gen func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf("model %d %s", turn, p))
	s.mu.Unlock()
	return gen(ctx)
}

func (s *recordingSteps) Tools(ctx context.Context, turn int, b *Batch) error {
	s.mu.Lock()
	for i := range b.Calls {
		s.log = append(s.log, fmt.Sprintf("tool %d %s ro=%v parallel=%v", turn, b.Calls[i].Name, b.ReadOnly(i), b.Parallel))
	}
	s.mu.Unlock()
	RunBatch(ctx, b)
	return nil
}

func TestCompactionSummarizesOlderTurnsAndKeepsPairsValid(t *testing.T) {
	t.Parallel()
	bulky := fn{name: "bulky", readOnly: true, run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("lorem ipsum ", 200), nil // ~600 tokens
	}}
	var summarized []llm.Request
	var mu sync.Mutex
	calls := 0
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		if req.System == summarizeSystem {
			mu.Lock()
			summarized = append(summarized, *req)
			mu.Unlock()
			return &llm.Response{Content: []llm.Block{llm.Text("SUMMARY")}, StopReason: llm.StopEndTurn,
				Usage: llm.Usage{InputTokens: 100, OutputTokens: 7}}, nil
		}
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		prompt := int64(llm.EstimateMessages(req.Messages))
		if n > 8 {
			return &llm.Response{Content: []llm.Block{llm.Text("finished")}, StopReason: llm.StopEndTurn,
				Usage: llm.Usage{InputTokens: prompt, OutputTokens: 1}}, nil
		}
		id := fmt.Sprintf("toolu_%d", n)
		return &llm.Response{Content: []llm.Block{llm.ToolUse(id, "bulky", json.RawMessage(`{}`))},
			StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: prompt, OutputTokens: 10}}, nil
	})
	steps := &recordingSteps{}
	var compactions []Event
	res, err := Run(context.Background(), Config{Model: model, Tools: tool.MustSet(bulky), Steps: steps,
		Compaction: Compaction{ContextWindow: 3000},
		OnEvent: func(e Event) {
			if e.Kind == EventCompaction {
				compactions = append(compactions, e)
			}
		}}, task("the task"))
	if err != nil {
		t.Fatal(err)
	}
	if len(compactions) == 0 || len(summarized) != len(compactions) {
		t.Fatalf("%d compactions, %d summary calls", len(compactions), len(summarized))
	}
	if len(summarized[0].Tools) != 0 || !strings.Contains(summarized[0].Messages[0].Text(), "lorem ipsum") {
		t.Fatalf("summary request %+v", summarized[0])
	}
	head := res.Messages[0].Content
	if len(head) != 2 || head[0].Text != "the task" || !strings.HasPrefix(head[len(head)-1].Text, SummaryPrefix+"SUMMARY") {
		t.Fatalf("head %+v", head)
	}
	checkTranscript(t, res.Messages)
	if res.Answer != "finished" || res.Usage.OutputTokens < int64(7*len(compactions)) {
		t.Fatalf("res %+v", res)
	}
	found := false
	for _, l := range steps.log {
		found = found || strings.HasSuffix(l, " compact")
	}
	if !found {
		t.Fatalf("compaction did not go through Steps: %v", steps.log)
	}
}

func TestStepsSeesEveryStep(t *testing.T) {
	t.Parallel()
	steps := &recordingSteps{}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("r", `{}`, "w", `{}`), say("ok")}}
	_, err := Run(context.Background(), Config{Model: m, Steps: steps,
		Tools: tool.MustSet(echo("r", true), echo("w", false))}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	want := "model 1 generate|tool 1 r ro=true parallel=false|tool 1 w ro=false parallel=false|model 2 generate"
	if got := strings.Join(steps.log, "|"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestTranscriptMustStartWithUser(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Config{Model: &script{}}, nil)
	if err == nil {
		t.Fatal("empty transcript accepted")
	}
}

func TestProviderAttemptsBecomeEvents(t *testing.T) {
	t.Parallel()
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
		stream(llm.Delta{Type: llm.TypeText, Text: "par"})
		llm.ReportAttempt(ctx, llm.Attempt{N: 1, Status: 529, Reason: "overloaded", Retry: true, Discarded: true})
		stream(llm.Delta{Type: llm.TypeText, Text: "full"})
		llm.ReportAttempt(ctx, llm.Attempt{N: 2, Status: 200})
		return &llm.Response{Content: []llm.Block{llm.Text("full")}, StopReason: llm.StopEndTurn}, nil
	})
	var got []string
	_, err := Run(context.Background(), Config{Model: model, Stream: true, OnEvent: func(e Event) {
		switch e.Kind {
		case EventModelDelta:
			got = append(got, "delta "+e.Delta.Text)
		case EventModelAttempt:
			got = append(got, fmt.Sprintf("attempt %d %d discarded=%v", e.Attempt.N, e.Attempt.Status, e.Attempt.Discarded))
		}
	}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	want := "delta par|attempt 1 529 discarded=true|delta full|attempt 2 200 discarded=false"
	if s := strings.Join(got, "|"); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
}

// TestNoStreamWithoutStream: unless Config.Stream asks for deltas and
// OnEvent is there to take them, every model call gets a nil stream
// callback (so a NonStreaming provider makes the cheaper call), and no
// EventModelDelta is emitted.
func TestNoStreamWithoutStream(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		stream  bool
		onEvent bool
	}{{"events without Stream", false, true}, {"Stream without events", true, false}, {"neither", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls, streamed atomic.Int32
			model := llm.ModelFunc(func(_ context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
				calls.Add(1)
				if stream != nil {
					streamed.Add(1)
				}
				if len(req.Messages) == 1 {
					return call("echo", `{}`)(req)
				}
				return say("ok")(req)
			})
			cfg := Config{Model: model, Tools: tool.MustSet(echo("echo", true)), Stream: c.stream}
			var deltas int
			if c.onEvent {
				cfg.OnEvent = func(e Event) {
					if e.Kind == EventModelDelta {
						deltas++
					}
				}
			}
			res, err := Run(context.Background(), cfg, task("go"))
			if err != nil || res.StopReason != StopCompleted {
				t.Fatalf("%v %+v", err, res)
			}
			if calls.Load() != 2 || streamed.Load() != 0 || deltas != 0 {
				t.Fatalf("%d calls, %d with a stream callback, %d delta events", calls.Load(), streamed.Load(), deltas)
			}
		})
	}
}

// TestStreamEmitsDeltas: with Config.Stream and OnEvent, the model gets a
// stream callback and its deltas arrive as EventModelDelta, in order,
// between the turn's start and its response.
func TestStreamEmitsDeltas(t *testing.T) {
	t.Parallel()
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
		if stream == nil {
			return nil, errors.New("no stream callback")
		}
		text := fmt.Sprintf("turn%d", len(req.Messages)/2+1)
		stream(llm.Delta{Type: llm.TypeText, Text: text[:2]})
		stream(llm.Delta{Type: llm.TypeText, Text: text[2:]})
		if len(req.Messages) == 1 {
			return call("echo", `{}`)(req)
		}
		return say(text)(req)
	})
	var got []string
	res, err := Run(context.Background(), Config{Model: model, Tools: tool.MustSet(echo("echo", true)), Stream: true,
		OnEvent: func(e Event) {
			switch e.Kind {
			case EventModelDelta:
				got = append(got, fmt.Sprintf("%d:%s", e.Turn, e.Delta.Text))
			case EventTurnStarted, EventModelResponse:
				got = append(got, fmt.Sprintf("%d%s", e.Turn, e.Kind))
			}
		}}, task("go"))
	if err != nil || res.StopReason != StopCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	want := "1turn_started 1:tu 1:rn1 1model_response 2turn_started 2:tu 2:rn2 2model_response"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
}

func TestRunNeverWritesIntoTheCallersTranscript(t *testing.T) {
	t.Parallel()
	parent := []llm.Message{llm.UserText("task"), {Role: llm.Assistant, Content: []llm.Block{llm.Text("parent's own")}}}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){say("child")}}
	res, err := Run(context.Background(), Config{Model: m}, parent[:1])
	if err != nil {
		t.Fatal(err)
	}
	if parent[1].Content[0].Text != "parent's own" || res.Messages[1].Content[0].Text != "child" {
		t.Fatalf("parent %+v, child %+v", parent[1], res.Messages[1])
	}
}

func TestMisconfiguredRunsFailCleanly(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Config{}, task("go"))
	if err == nil || res.StopReason != StopModelError {
		t.Fatalf("nil model: %v %+v", err, res)
	}
	nothing := llm.ModelFunc(func(context.Context, *llm.Request, func(llm.Delta)) (*llm.Response, error) { return nil, nil })
	res, err = Run(context.Background(), Config{Model: nothing}, task("go"))
	if err == nil || !strings.Contains(err.Error(), "no response") || res.StopReason != StopModelError {
		t.Fatalf("nil response: %v %+v", err, res)
	}
}

// failingSteps runs model steps but cannot run tool steps, like a durable
// runner whose store went away.
type failingSteps struct{ Direct }

func (failingSteps) Tools(context.Context, int, *Batch) error { return errors.New("store unavailable") }

func TestAStepErrorKeepsTheTranscriptValid(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", `{}`, "echo", `{}`)}}
	res, err := Run(context.Background(), Config{Model: m, Steps: failingSteps{}, Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if err == nil || res.StopReason != StopStepError || res.ToolCalls != 0 {
		t.Fatalf("err %v res %+v", err, res)
	}
	checkTranscript(t, res.Messages)
	if r := res.Messages[2].Content[1]; !r.IsError || !strings.Contains(r.Text, "store unavailable") {
		t.Fatalf("result %+v", r)
	}
}

func TestToolsDoNotReportAttemptsIntoTheRunsEvents(t *testing.T) {
	t.Parallel()
	// A tool that runs a model of its own (a subagent) reports attempts on
	// the context it was given; they must not reach this run's OnEvent.
	nested := fn{name: "nested", readOnly: true, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		llm.ReportAttempt(ctx, llm.Attempt{N: 99})
		return "ok", nil
	}}
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		llm.ReportAttempt(ctx, llm.Attempt{N: 1, Status: 200})
		if len(req.Messages) == 1 {
			return call("nested", `{}`)(req)
		}
		return say("ok")(req)
	})
	var attempts []int
	_, err := Run(context.Background(), Config{Model: model, Tools: tool.MustSet(nested), OnEvent: func(e Event) {
		if e.Kind == EventModelAttempt {
			attempts = append(attempts, e.Attempt.N)
		}
	}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(attempts) != "[1 1]" {
		t.Fatalf("attempt events %v", attempts)
	}
}
