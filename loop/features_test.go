package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// keepingSteps runs batches like Direct, then hands the loop its own copy of
// the results with spare capacity and keeps it, the way a durable runner
// hands back results it recorded. Anything the loop later appends in place
// would land in that spare capacity, where the test can see it.
type keepingSteps struct {
	Direct
	mu   sync.Mutex
	kept [][]llm.Block
}

func (s *keepingSteps) Tools(ctx context.Context, turn int, b *Batch) error {
	RunBatch(ctx, b)
	own := make([]llm.Block, len(b.Results), len(b.Results)+4)
	copy(own, b.Results)
	b.Results = own
	s.mu.Lock()
	s.kept = append(s.kept, own)
	s.mu.Unlock()
	return nil
}

// checkNotWrittenPastLen fails when anything was stored in blocks' spare
// capacity or when its visible blocks changed from want.
func checkNotWrittenPastLen(t *testing.T, blocks, want []llm.Block) {
	t.Helper()
	if !reflect.DeepEqual(blocks, want) {
		t.Fatalf("shared blocks changed: %+v, want %+v", blocks, want)
	}
	for i, b := range blocks[len(blocks):cap(blocks)] {
		if !reflect.DeepEqual(b, llm.Block{}) {
			t.Fatalf("spare slot %d of a shared content array was written: %+v", i, b)
		}
	}
}

func TestSoftWallTimeWrapsUpWithOneLastCall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		elapsed time.Duration // how long the first turn's tool call takes
		second  func(*llm.Request) (*llm.Response, error)
		stop    StopReason
		wrapUp  bool
	}{
		{"tool call in the last turn is not run", time.Minute, call("work", `{}`, "work", `{}`), StopWallTime, true},
		{"text answer in the last turn completes", time.Minute + time.Second, say("final"), StopCompleted, true},
		{"before the soft time nothing changes", time.Minute - time.Second, say("final"), StopCompleted, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Unix(0, 0))
			var ran atomic.Int32
			work := fn{name: "work", run: func(context.Context, json.RawMessage) (string, error) {
				ran.Add(1)
				clk.Advance(c.elapsed) // the call "took" this long
				return "worked", nil
			}}
			m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("work", `{}`), c.second, say("extra")}}
			steps := &keepingSteps{}
			var events []string
			caller := make([]llm.Message, 1, 8)
			caller[0] = llm.UserText("task")
			res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(work), Clock: clk, Steps: steps,
				Limits: Limits{SoftWallTime: time.Minute, WallTime: time.Hour},
				OnEvent: func(e Event) {
					if e.Kind == EventWrapUp || e.Kind == EventTurnStarted || e.Kind == EventFinished {
						events = append(events, fmt.Sprintf("%d%s", e.Turn, e.Kind))
					}
				}}, caller)
			if err != nil {
				t.Fatal(err)
			}
			checkTranscript(t, res.Messages)
			reqs := m.requests()
			if res.StopReason != c.stop || res.Turns != 2 || len(reqs) != 2 || ran.Load() != 1 || res.ToolCalls != 1 {
				t.Fatalf("stop %s turns %d requests %d tool runs %d tool calls %d", res.StopReason, res.Turns, len(reqs), ran.Load(), res.ToolCalls)
			}
			if strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Text(), WrapUp) {
				t.Fatal("the first call already carried the wrap-up")
			}
			// The second request's last message: the tool result, then (when
			// wrapping up) the wrap-up text in the same user message.
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			want := []llm.Block{steps.kept[0][0]}
			wantEvents := "1turn_started 2turn_started 2finished"
			if c.wrapUp {
				want = append(want, llm.Text(WrapUp))
				wantEvents = "1turn_started 2wrap_up 2turn_started 2finished"
			}
			if last.Role != llm.User || !reflect.DeepEqual(last.Content, want) {
				t.Fatalf("last message of the second request %+v, want %+v", last, want)
			}
			if !reflect.DeepEqual(res.Messages[2], last) {
				t.Fatalf("the transcript's message %+v differs from what was sent %+v", res.Messages[2], last)
			}
			if got := strings.Join(events, " "); got != wantEvents {
				t.Fatalf("events %s, want %s", got, wantEvents)
			}
			// The wrap-up went to a copy: the results array the steps runner
			// kept and the caller's transcript were not written into.
			if len(steps.kept) != 1 {
				t.Fatalf("%d tool batches", len(steps.kept))
			}
			checkNotWrittenPastLen(t, steps.kept[0], []llm.Block{llm.ToolResult(reqs[1].Messages[1].Content[0].ID, "worked", false)})
			if spare := caller[:cap(caller)][1]; spare.Role != "" || len(spare.Content) != 0 {
				t.Fatalf("the caller's transcript was written into: %+v", spare)
			}

			switch c.stop {
			case StopWallTime:
				final := res.Messages[4].Content
				if len(final) != 2 {
					t.Fatalf("final results %+v", final)
				}
				for _, r := range final {
					if !r.IsError || r.Text != "not run: time is up; answer with what you have" {
						t.Fatalf("unrun call answered %+v", r)
					}
				}
			case StopCompleted:
				if res.Answer != "final" || len(res.Messages) != 4 {
					t.Fatalf("answer %q after %d messages", res.Answer, len(res.Messages))
				}
			}
		})
	}
}

func TestSoftWallTimeFromASlowModelCall(t *testing.T) {
	t.Parallel()
	// The soft time passes during the first model call; the wrap-up goes
	// with its tool results, and only once even if the model keeps calling.
	clk := clock.NewFake(time.Unix(0, 0))
	slow := func(req *llm.Request) (*llm.Response, error) {
		clk.Advance(2 * time.Minute)
		return call("echo", `{}`)(req)
	}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){slow, slow, slow}}
	wrapUps := 0
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true)), Clock: clk,
		Limits: Limits{SoftWallTime: time.Minute},
		OnEvent: func(e Event) {
			if e.Kind == EventWrapUp {
				wrapUps++
			}
		}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopWallTime || res.Turns != 2 || res.ToolCalls != 1 || wrapUps != 1 || len(m.requests()) != 2 {
		t.Fatalf("stop %s turns %d calls %d wrap-ups %d requests %d", res.StopReason, res.Turns, res.ToolCalls, wrapUps, len(m.requests()))
	}
	n := 0
	for _, msg := range res.Messages {
		n += strings.Count(msg.Text(), WrapUp)
	}
	if n != 1 {
		t.Fatalf("wrap-up appears %d times in the transcript", n)
	}
	checkTranscript(t, res.Messages)
}

// testBudget is a token budget shared by runs.
type testBudget struct {
	mu     sync.Mutex
	limit  int64
	spent  llm.Usage
	models []string
}

func (b *testBudget) Spend(model string, u llm.Usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent.Add(u)
	b.models = append(b.models, model)
}

func (b *testBudget) Spent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent.Total() >= b.limit
}

func (b *testBudget) state() (llm.Usage, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent, slices.Clone(b.models)
}

func TestBudgetIsSpentByEveryCallAndStopsTheRun(t *testing.T) {
	t.Parallel()
	b := &testBudget{limit: 30} // two calls of 15 tokens
	m := &script{steps: forever(10)}
	res, err := Run(context.Background(), Config{Model: m, ModelName: "model-a", Budget: b,
		Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	spent, models := b.state()
	if res.StopReason != StopBudget || res.Turns != 2 || res.ToolCalls != 2 || len(m.requests()) != 2 {
		t.Fatalf("stop %s turns %d calls %d requests %d", res.StopReason, res.Turns, res.ToolCalls, len(m.requests()))
	}
	if spent != res.Usage || !slices.Equal(models, []string{"model-a", "model-a"}) {
		t.Fatalf("budget saw %+v from %v, the run used %+v", spent, models, res.Usage)
	}
	checkTranscript(t, res.Messages)

	// Another run sharing the spent budget makes no call at all.
	m2 := &script{steps: forever(1)}
	res, err = Run(context.Background(), Config{Model: m2, ModelName: "model-b", Budget: b,
		Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if err != nil || res.StopReason != StopBudget || res.Turns != 0 || len(m2.requests()) != 0 {
		t.Fatalf("err %v stop %s turns %d requests %d", err, res.StopReason, res.Turns, len(m2.requests()))
	}
	if after, _ := b.state(); after != spent {
		t.Fatalf("budget moved without a call: %+v -> %+v", spent, after)
	}

	// An unspent budget does not stop a run.
	b3 := &testBudget{limit: 1 << 40}
	m3 := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", `{}`), say("done")}}
	res, err = Run(context.Background(), Config{Model: m3, ModelName: "model-c", Budget: b3,
		Tools: tool.MustSet(echo("echo", true))}, task("go"))
	if spent, models := b3.state(); err != nil || res.StopReason != StopCompleted || spent.Total() != 30 || len(models) != 2 {
		t.Fatalf("err %v stop %s spent %+v models %v", err, res.StopReason, spent, models)
	}
}

func TestBudgetIsSpentByCompactionCalls(t *testing.T) {
	t.Parallel()
	bulky := fn{name: "bulky", readOnly: true, run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("lorem ipsum ", 200), nil
	}}
	var mu sync.Mutex
	var sum llm.Usage
	main, summaries := 0, 0
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.System == summarizeSystem {
			summaries++
			u := llm.Usage{InputTokens: 100, OutputTokens: 7}
			sum.Add(u)
			return &llm.Response{Content: []llm.Block{llm.Text("SUMMARY")}, StopReason: llm.StopEndTurn, Usage: u}, nil
		}
		main++
		u := llm.Usage{InputTokens: int64(llm.EstimateMessages(req.Messages)), OutputTokens: 10}
		sum.Add(u)
		if main > 6 {
			return &llm.Response{Content: []llm.Block{llm.Text("finished")}, StopReason: llm.StopEndTurn, Usage: u}, nil
		}
		return &llm.Response{Content: []llm.Block{llm.ToolUse(fmt.Sprint("toolu_", main), "bulky", json.RawMessage(`{}`))},
			StopReason: llm.StopToolUse, Usage: u}, nil
	})
	b := &testBudget{limit: 1 << 40}
	res, err := Run(context.Background(), Config{Model: model, ModelName: "m", Budget: b, Tools: tool.MustSet(bulky),
		Compaction: Compaction{ContextWindow: 3000}}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	spent, models := b.state()
	if summaries == 0 || len(models) != main+summaries || spent != sum || res.Usage != sum {
		t.Fatalf("%d main + %d summary calls; budget saw %d spends of %+v; run %+v; model %+v",
			main, summaries, len(models), spent, res.Usage, sum)
	}
}

func TestAskMakesOneReportCallOnACopy(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	trap := fn{name: "trap", run: func(context.Context, json.RawMessage) (string, error) {
		ran.Add(1)
		return "ran", nil
	}}
	tools := tool.MustSet(trap)
	answer := &llm.Response{Content: []llm.Block{llm.Text("the report"), llm.ToolUse("toolu_x", "trap", json.RawMessage(`{}`))},
		StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 40, OutputTokens: 9}}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		func(*llm.Request) (*llm.Response, error) { return answer, nil },
		func(*llm.Request) (*llm.Response, error) { return answer, nil },
	}}
	steps := &recordingSteps{}
	b := &testBudget{limit: 1 << 40}
	choice := llm.ToolChoice{Type: "any", DisableParallel: true}
	cfg := Config{Model: m, ModelName: "m1", System: "sys", Tools: tools, ToolChoice: choice, Steps: steps, Budget: b,
		Limits: Limits{MaxOutputTokens: 999}}

	// A finished run's transcript ending in tool results, with spare
	// capacity both in the message list and in the last message's blocks.
	results := make([]llm.Block, 1, 4)
	results[0] = llm.ToolResult("toolu_1", "out", false)
	msgs := make([]llm.Message, 3, 6)
	msgs[0] = llm.UserText("task")
	msgs[1] = llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("toolu_1", "trap", json.RawMessage(`{}`))}}
	msgs[2] = llm.Message{Role: llm.User, Content: results}
	before := slices.Clone(msgs)

	resp, err := Ask(context.Background(), cfg, msgs, "report again, shorter", 7, 123)
	if err != nil {
		t.Fatal(err)
	}
	if resp != answer || ran.Load() != 0 {
		t.Fatalf("response %+v, tool ran %d times", resp, ran.Load())
	}
	if got := strings.Join(steps.log, "|"); got != "model 7 report" {
		t.Fatalf("steps %s", got)
	}
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	req := reqs[0]
	if req.Model != "m1" || req.System != "sys" || req.MaxTokens != 123 || req.ToolChoice != choice ||
		!reflect.DeepEqual(req.Tools, tools.Specs()) {
		t.Fatalf("request %+v", req)
	}
	wantLast := []llm.Block{results[0], llm.Text("report again, shorter")}
	if len(req.Messages) != 3 || !reflect.DeepEqual(req.Messages[2].Content, wantLast) ||
		!reflect.DeepEqual(req.Messages[:2], before[:2]) {
		t.Fatalf("request messages %+v", req.Messages)
	}
	if spent, models := b.state(); spent != answer.Usage || !slices.Equal(models, []string{"m1"}) {
		t.Fatalf("budget %+v %v", spent, models)
	}
	// The caller's transcript is untouched, spare capacity included.
	if !reflect.DeepEqual(msgs, before) {
		t.Fatalf("transcript changed: %+v", msgs)
	}
	checkNotWrittenPastLen(t, msgs[2].Content, []llm.Block{llm.ToolResult("toolu_1", "out", false)})
	if spare := msgs[:cap(msgs)][3]; spare.Role != "" || spare.Content != nil {
		t.Fatalf("message list written into: %+v", spare)
	}

	// After an assistant answer the question is a new user message.
	done := []llm.Message{llm.UserText("task"), {Role: llm.Assistant, Content: []llm.Block{llm.Text("too long")}}}
	if _, err := Ask(context.Background(), Config{Model: m}, done, "shorter", 2, 50); err != nil {
		t.Fatal(err)
	}
	req = m.requests()[1]
	if len(req.Messages) != 3 || req.Messages[2].Role != llm.User || req.Messages[2].Text() != "shorter" ||
		req.MaxTokens != 50 || len(done) != 2 {
		t.Fatalf("request %+v", req)
	}
}

func TestAskFailures(t *testing.T) {
	t.Parallel()
	b := &testBudget{limit: 1 << 40}
	msgs := task("go")
	if _, err := Ask(context.Background(), Config{Budget: b}, msgs, "q", 1, 10); err == nil {
		t.Fatal("nil model accepted")
	}
	down := errors.New("provider down")
	failing := llm.ModelFunc(func(context.Context, *llm.Request, func(llm.Delta)) (*llm.Response, error) { return nil, down })
	if _, err := Ask(context.Background(), Config{Model: failing, Budget: b}, msgs, "q", 1, 10); !errors.Is(err, down) {
		t.Fatalf("err %v", err)
	}
	nothing := llm.ModelFunc(func(context.Context, *llm.Request, func(llm.Delta)) (*llm.Response, error) { return nil, nil })
	if _, err := Ask(context.Background(), Config{Model: nothing, Budget: b}, msgs, "q", 1, 10); err == nil ||
		!strings.Contains(err.Error(), "no response") {
		t.Fatalf("err %v", err)
	}
	if spent, models := b.state(); len(models) != 0 || spent.Total() != 0 {
		t.Fatalf("failed calls were spent: %+v %v", spent, models)
	}
}

func TestCallFromGivesToolsTheirCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]Call{}
	who := fn{name: "who", readOnly: true, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		c, ok := CallFrom(ctx)
		if !ok {
			return "", errors.New("no call in the context")
		}
		mu.Lock()
		seen[c.ID] = *c
		mu.Unlock()
		return "ok", nil
	}}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("who", `{}`), call("who", `{"a":1}`, "who", `{"b":2}`), say("done")}}
	tools := tool.MustSet(who)
	res, err := Run(context.Background(), Config{Model: m, Tools: tools}, task("go"))
	if err != nil || res.StopReason != StopCompleted {
		t.Fatalf("err %v res %+v", err, res)
	}
	ids := 0
	for i, msg := range res.Messages {
		for _, u := range msg.ToolUses() {
			ids++
			c, ok := seen[u.ID]
			if !ok {
				t.Fatalf("tool_use %s did not see its call", u.ID)
			}
			turn := (i + 1) / 2
			if c.ID != u.ID || c.Turn != turn || !reflect.DeepEqual(c.Transcript, res.Messages[:i+1]) {
				t.Fatalf("call %s: turn %d (want %d), transcript of %d messages (want %d)", u.ID, c.Turn, turn, len(c.Transcript), i+1)
			}
		}
	}
	if ids != 3 || len(seen) != 3 {
		t.Fatalf("%d tool uses, %d calls seen", ids, len(seen))
	}
	// Outside a loop there is no call.
	if _, ok := CallFrom(context.Background()); ok {
		t.Fatal("CallFrom found a call in a bare context")
	}
	if out, isErr := tools.Call(context.Background(), "who", json.RawMessage(`{}`)); !isErr || !strings.Contains(out, "no call") {
		t.Fatalf("direct call: %q", out)
	}
}

// concurrentFn is a side-effecting tool that declares whether its calls may
// run in parallel.
type concurrentFn struct {
	fn
	concurrent bool
}

func (c concurrentFn) Concurrent() bool { return c.concurrent }

func TestConcurrentToolsRunInParallelWithReadOnlyOnes(t *testing.T) {
	t.Parallel()
	// Each call waits until the other has started: only a parallel batch
	// can finish. The deadline only keeps a sequential run from hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spawnStarted, lookStarted := make(chan struct{}), make(chan struct{})
	rendezvous := func(mine, other chan struct{}) func(context.Context, json.RawMessage) (string, error) {
		return func(ctx context.Context, _ json.RawMessage) (string, error) {
			close(mine)
			select {
			case <-other:
				return "met", nil
			case <-ctx.Done():
				return "", errors.New("the other call never started")
			}
		}
	}
	spawn := concurrentFn{fn: fn{name: "spawn", run: rendezvous(spawnStarted, lookStarted)}, concurrent: true}
	look := fn{name: "look", readOnly: true, run: rendezvous(lookStarted, spawnStarted)}
	steps := &recordingSteps{}
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("spawn", `{}`, "look", `{}`), say("ok")}}
	res, err := Run(ctx, Config{Model: m, Steps: steps, Tools: tool.MustSet(spawn, look)}, task("go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Messages[2].Content {
		if r.IsError || r.Text != "met" {
			t.Fatalf("result %+v", r)
		}
	}
	want := "model 1 generate|tool 1 spawn ro=false parallel=true|tool 1 look ro=true parallel=true|model 2 generate"
	if got := strings.Join(steps.log, "|"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestBatchParallelFollowsConcurrent(t *testing.T) {
	t.Parallel()
	var running, most atomic.Int32
	body := func(name string) func(context.Context, json.RawMessage) (string, error) {
		return func(context.Context, json.RawMessage) (string, error) {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			running.Add(-1)
			return name, nil
		}
	}
	tools := tool.MustSet(
		concurrentFn{fn: fn{name: "spawn", run: body("spawn")}, concurrent: true},
		concurrentFn{fn: fn{name: "nope", run: body("nope")}, concurrent: false},
		fn{name: "write", run: body("write")},
		fn{name: "read", readOnly: true, run: body("read")},
	)
	cases := []struct {
		calls    []string
		parallel bool
	}{
		{[]string{"spawn", "read"}, true},
		{[]string{"spawn", "spawn"}, true},
		{[]string{"read", "missing"}, true}, // an unknown tool only earns an error
		{[]string{"spawn", "write"}, false},
		{[]string{"spawn", "nope"}, false},
		{[]string{"read", "write", "spawn"}, false},
		{[]string{"spawn"}, false}, // one call needs no goroutine
	}
	for _, c := range cases {
		var pairs []string
		for _, n := range c.calls {
			pairs = append(pairs, n, `{}`)
		}
		steps := &recordingSteps{}
		most.Store(0)
		m := &script{steps: []func(*llm.Request) (*llm.Response, error){call(pairs...), say("ok")}}
		if _, err := Run(context.Background(), Config{Model: m, Steps: steps, Tools: tools}, task("go")); err != nil {
			t.Fatal(err)
		}
		// A sequential batch never overlaps (a parallel one may or may
		// not, by chance, so it is not checked here).
		if !c.parallel && most.Load() > 1 {
			t.Errorf("calls %v: %d ran at once in a sequential batch", c.calls, most.Load())
		}
		for _, l := range steps.log {
			if strings.HasPrefix(l, "tool ") && !strings.HasSuffix(l, fmt.Sprintf("parallel=%v", c.parallel)) {
				t.Errorf("calls %v: %s, want parallel=%v", c.calls, l, c.parallel)
			}
		}
	}
}

// TestMessageEventsRebuildTheOriginalTranscript: the EventMessage stream,
// appended to the messages given to Run, is the whole transcript, with the
// turns a compaction replaced still in it (what a store keeps).
func TestMessageEventsRebuildTheOriginalTranscript(t *testing.T) {
	t.Parallel()
	bulky := fn{name: "bulky", readOnly: true, run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("lorem ipsum ", 200), nil // ~600 tokens
	}}
	calls := 0
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		if req.System == summarizeSystem {
			return &llm.Response{Content: []llm.Block{llm.Text("SUMMARY")}, StopReason: llm.StopEndTurn}, nil
		}
		calls++
		prompt := int64(llm.EstimateMessages(req.Messages))
		if calls > 8 {
			return &llm.Response{Content: []llm.Block{llm.Text("finished")}, StopReason: llm.StopEndTurn,
				Usage: llm.Usage{InputTokens: prompt, OutputTokens: 1}}, nil
		}
		return &llm.Response{Content: []llm.Block{llm.ToolUse(fmt.Sprintf("toolu_%d", calls), "bulky", json.RawMessage(`{}`))},
			StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: prompt, OutputTokens: 10}}, nil
	})
	var got []llm.Message
	compactions := 0
	start := task("go")
	res, err := Run(context.Background(), Config{Model: model, Tools: tool.MustSet(bulky),
		Compaction: Compaction{ContextWindow: 3000},
		OnEvent: func(e Event) {
			switch e.Kind {
			case EventMessage:
				got = append(got, e.Message)
			case EventCompaction:
				compactions++
			}
		}}, start)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(start), got...)
	if compactions == 0 || len(all) != 1+2*8+1 {
		t.Fatalf("%d compactions; %d original messages, want the task, 8 turns of call and result, and the answer", compactions, len(all))
	}
	// The live transcript's kept tail is the original's tail.
	tail := res.Messages[1:]
	for i := range tail {
		j := len(all) - len(tail) + i
		if !reflect.DeepEqual(all[j], tail[i]) {
			t.Fatalf("message %d of the live tail differs from original %d", i, j)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].Role == all[i-1].Role {
			t.Fatalf("roles do not alternate at %d", i)
		}
	}
}
