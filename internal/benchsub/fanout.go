package benchsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	osdk "github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// FanOutConfig sizes the fan-out workload: Children workers of Turns model
// calls each (a call of the no-op tool on every turn but the last, which
// answers: the benchmark measures orchestration, not a tool's work),
// at most MaxParallel at once, every model response delayed by Latency
// (the fake server's first-byte latency, on the real clock).
type FanOutConfig struct {
	Children, Turns, MaxParallel int
	Latency                      time.Duration
}

// DefaultFanOut is the workload.
var DefaultFanOut = FanOutConfig{Children: 200, Turns: 3, MaxParallel: 50, Latency: 100 * time.Millisecond}

// How a fan-out runs.
const (
	// ViaDeputy: a root agent spawns the workers as isolated subagents
	// through spawn_subagent in one turn, with Runner.MaxParallel, then
	// answers from their reports.
	ViaDeputy = "deputy"
	// ViaProviderLoop: plain goroutine loops calling deputy's provider
	// (llm.Model) directly, no agent, loop or tool machinery.
	ViaProviderLoop = "provider_loop"
	// ViaBareSDK: plain goroutine loops calling the official SDK
	// (anthropic-sdk-go, openai-go), streaming, as an SDK user would.
	ViaBareSDK = "bare_sdk"
)

// FanOutVias lists the ways, in the order the command runs them.
var FanOutVias = []string{ViaDeputy, ViaProviderLoop, ViaBareSDK}

// FanOutResult is one fan-out run. Its Ideal is FanOutConfig.Ideal; its
// phases are ViaDeputy's (the loops have no root), the first turn being the
// request and then 100s of spawn calls streamed back, and the children's
// phase having the bare loops' ideal.
type FanOutResult struct {
	Wire string `json:"wire"`
	Via  string `json:"via"`
	Timing
}

const (
	fanSystem     = "You are a fan-out worker."
	fanRootSystem = "You are the root agent of the fan-out benchmark."
)

func fanScenario(c FanOutConfig) string {
	return fmt.Sprintf(`
name: bench-fanout
latency: {first_byte: %[1]s}
rules:
  - match: {system: "fan-out worker", turn: "1-%[2]d"}
    tool_calls: [{name: noop, input: {path: "{{.Task}}/{{.Turn}}"}}]
  - match: {system: "fan-out worker"}
    text: "Conclusion: {{.Task}} done on turn {{.Turn}}: {{.Result \"noop\"}}."
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, repeat: %[3]d, input: {subagent_type: worker, task: "part {{.I}}", description: "part {{.I}}"}}
  - match: {turn: 2}
    text: "Merged {{len .ToolResults}} reports."
`, c.Latency, c.Turns-1, c.Children)
}

// Ideal is the fan-out's wall time from latency alone, for via.
func (c FanOutConfig) Ideal(via string) time.Duration {
	waves := (c.Children + c.MaxParallel - 1) / c.MaxParallel
	d := time.Duration(waves*c.Turns) * c.Latency
	if via == ViaDeputy {
		d += 2 * c.Latency // the root's spawning turn and its answer
	}
	return d
}

// FanOut runs the fan-out workload once on wire, via one of FanOutVias.
func FanOut(ctx context.Context, wire, via string, c FanOutConfig) (*FanOutResult, error) {
	if c.Children < 1 || c.Turns < 2 || c.MaxParallel < 1 || c.Latency < 0 {
		return nil, fmt.Errorf("fan-out: need at least 1 child, 2 turns, 1 parallel: %+v", c)
	}
	srv, err := startServer(fanScenario(c), "bench-fanout.yaml", 0, c.MaxParallel+8)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	ctx, cancel := withTimeout(ctx)
	defer cancel()

	var run func() (phases []time.Duration, peak int, err error)
	switch via {
	case ViaDeputy:
		run, err = deputyFan(ctx, srv, wire, c)
	case ViaProviderLoop:
		run, err = providerFan(ctx, srv, wire, c)
	case ViaBareSDK:
		run, err = bareFan(ctx, srv, wire, c)
	default:
		err = fmt.Errorf("unknown fan-out via %q (have: %s)", via, strings.Join(FanOutVias, ", "))
	}
	if err != nil {
		return nil, err
	}
	start := time.Now()
	phases, peak, err := run()
	wall := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("fan-out %s %s: %w", wire, via, err)
	}
	res := &FanOutResult{Wire: wire, Via: via, Timing: Timing{Wall: wall, Ideal: c.Ideal(via), PeakRunning: peak}}
	if len(phases) == 4 {
		res.phases(phases)
	}
	want := c.Children * c.Turns
	if via == ViaDeputy {
		want += 2
	}
	if err := res.settle(srv, want); err != nil {
		return nil, fmt.Errorf("fan-out %s %s: %w", wire, via, err)
	}
	return res, nil
}

// peak tracks how many workers run at once.
type peak struct {
	now, most atomic.Int64
}

func (p *peak) enter() {
	n := p.now.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *peak) leave() { p.now.Add(-1) }

func deputyFan(ctx context.Context, srv *server, wire string, c FanOutConfig) (func() ([]time.Duration, int, error), error) {
	model, err := srv.model(wire)
	if err != nil {
		return nil, err
	}
	var running peak
	var start time.Time
	var phases []time.Duration // only the root's goroutine appends
	r := &agent.Runner{MaxParallel: c.MaxParallel, OnEvent: func(e agent.Event) {
		if e.Depth == 0 && e.Kind == agent.EventStep &&
			(e.Loop.Kind == loop.EventTurnStarted || e.Loop.Kind == loop.EventModelResponse) {
			phases = append(phases, time.Since(start))
		}
		if e.Depth != 1 {
			return
		}
		switch e.Kind {
		case agent.EventSpawned:
			running.enter()
		case agent.EventEnded:
			running.leave()
		}
	}}
	task := agent.Task{Task: "Process every part.", System: fanRootSystem, Model: model, ModelName: ModelName,
		Tools: tool.MustSet(benchloop.Noop{}),
		Volatile: []*agentdef.Definition{{Name: "worker", Description: "Processes one part.", SystemPrompt: fanSystem,
			Tools: []string{"noop"}, Mode: agentdef.ModeIsolated}}}
	return func() ([]time.Duration, int, error) {
		start = time.Now()
		o, err := r.Run(ctx, task)
		if err != nil {
			return nil, 0, err
		}
		if o.Result.Turns != 2 || len(o.Instances) != 1+c.Children {
			return nil, 0, fmt.Errorf("%d root turns, %d instances, want 2 and %d", o.Result.Turns, len(o.Instances), 1+c.Children)
		}
		for _, in := range o.Instances[1:] {
			if in.State != instance.Completed || in.Turns != c.Turns {
				return nil, 0, fmt.Errorf("child %s: %s after %d turns (%s)", in.Description, in.State, in.Turns, in.Error)
			}
		}
		return phases, int(running.most.Load()), nil
	}, nil
}

// fanLoops runs worker(i) for every child, at most c.MaxParallel at once,
// as plain goroutines.
func fanLoops(c FanOutConfig, worker func(i int) error) ([]time.Duration, int, error) {
	var running peak
	sem := make(chan struct{}, c.MaxParallel)
	errs := make([]error, c.Children)
	var wg sync.WaitGroup
	for i := range c.Children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			running.enter()
			errs[i] = worker(i + 1)
			running.leave()
			<-sem
		}()
	}
	wg.Wait()
	return nil, int(running.most.Load()), errors.Join(errs...)
}

// noopSpec is the no-op tool the workers call; the loops answer its calls
// as it does.
var noopSpec = benchloop.Noop{}.Spec()

const noopResult = "ok"

func providerFan(ctx context.Context, srv *server, wire string, c FanOutConfig) (func() ([]time.Duration, int, error), error) {
	model, err := srv.model(wire)
	if err != nil {
		return nil, err
	}
	spec := noopSpec
	worker := func(i int) error {
		req := &llm.Request{Model: ModelName, System: fanSystem, Tools: []llm.ToolSpec{spec}, MaxTokens: 8192,
			Messages: []llm.Message{llm.UserText(fmt.Sprintf("part %d", i))}}
		for turn := 1; turn <= c.Turns; turn++ {
			resp, err := model.Generate(ctx, req, nil)
			if err != nil {
				return err
			}
			uses := resp.Message().ToolUses()
			if (turn < c.Turns) != (len(uses) > 0) {
				return fmt.Errorf("worker %d turn %d: %d tool calls", i, turn, len(uses))
			}
			if len(uses) == 0 {
				return nil
			}
			results := make([]llm.Block, len(uses))
			for k, u := range uses {
				results[k] = llm.ToolResult(u.ID, noopResult, false)
			}
			req.Messages = append(req.Messages, resp.Message(), llm.Message{Role: llm.User, Content: results})
		}
		return nil
	}
	return func() ([]time.Duration, int, error) { return fanLoops(c, worker) }, nil
}

// bareFan is the fan-out on the official SDK alone, as an SDK user would
// write it: a loop per child of streamed calls, each tool call answered
// as noop does.
func bareFan(ctx context.Context, srv *server, wire string, c FanOutConfig) (func() ([]time.Duration, int, error), error) {
	var worker func(i int) error
	var err error
	switch wire {
	case "anthropic":
		worker = bareAnthropicWorker(ctx, srv, c)
	case "openai":
		worker, err = bareOpenAIWorker(ctx, srv, c)
	default:
		err = fmt.Errorf("unknown wire %q", wire)
	}
	if err != nil {
		return nil, err
	}
	return func() ([]time.Duration, int, error) { return fanLoops(c, worker) }, nil
}

// bareAnthropicWorker is bareFan's worker on anthropic-sdk-go: child i's
// c.Turns calls, a tool call on each but the last.
func bareAnthropicWorker(ctx context.Context, srv *server, c FanOutConfig) func(i int) error {
	spec := noopSpec
	client := asdk.NewClient(aopt.WithoutEnvironmentDefaults(), aopt.WithAPIKey("bench"), aopt.WithBaseURL(srv.url),
		aopt.WithHTTPClient(srv.client), aopt.WithMaxRetries(0))
	tools := []asdk.ToolUnionParam{{OfTool: &asdk.ToolParam{Name: spec.Name, Description: param.NewOpt(spec.Description),
		InputSchema: param.Override[asdk.ToolInputSchemaParam](spec.InputSchema)}}}
	return func(i int) error {
		p := asdk.MessageNewParams{Model: ModelName, MaxTokens: 8192, System: []asdk.TextBlockParam{{Text: fanSystem}},
			Tools: tools, Messages: []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock(fmt.Sprintf("part %d", i)))}}
		for turn := 1; turn <= c.Turns; turn++ {
			acc, err := streamAnthropic(ctx, &client, p)
			if err != nil {
				return err
			}
			var results []asdk.ContentBlockParamUnion
			for _, b := range acc.Content {
				if b.Type == "tool_use" {
					results = append(results, asdk.NewToolResultBlock(b.ID, noopResult, false))
				}
			}
			if (turn < c.Turns) != (len(results) > 0) {
				return fmt.Errorf("worker %d turn %d: %d tool calls", i, turn, len(results))
			}
			if len(results) == 0 {
				return nil
			}
			p.Messages = append(p.Messages, acc.ToParam(), asdk.NewUserMessage(results...))
		}
		return nil
	}
}

// streamAnthropic makes one streamed call and accumulates its message.
func streamAnthropic(ctx context.Context, client *asdk.Client, p asdk.MessageNewParams) (*asdk.Message, error) {
	s := client.Messages.NewStreaming(ctx, p)
	defer s.Close()
	var acc asdk.Message
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &acc, nil
}

// bareOpenAIWorker is bareFan's worker on openai-go: child i's c.Turns
// calls, a tool call on each but the last.
func bareOpenAIWorker(ctx context.Context, srv *server, c FanOutConfig) (func(i int) error, error) {
	spec := noopSpec
	client := osdk.NewClient(oopt.WithAPIKey("bench"), oopt.WithBaseURL(srv.url+"/v1"),
		oopt.WithHTTPClient(srv.client), oopt.WithMaxRetries(0))
	var params shared.FunctionParameters
	if err := json.Unmarshal(spec.InputSchema, &params); err != nil {
		return nil, err
	}
	tools := []osdk.ChatCompletionToolUnionParam{osdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: spec.Name, Description: osdk.String(spec.Description), Parameters: params})}
	return func(i int) error {
		p := osdk.ChatCompletionNewParams{Model: ModelName, MaxCompletionTokens: osdk.Int(8192), Tools: tools,
			StreamOptions: osdk.ChatCompletionStreamOptionsParam{IncludeUsage: osdk.Bool(true)},
			Messages:      []osdk.ChatCompletionMessageParamUnion{osdk.SystemMessage(fanSystem), osdk.UserMessage(fmt.Sprintf("part %d", i))}}
		for turn := 1; turn <= c.Turns; turn++ {
			acc, err := streamOpenAI(ctx, &client, p)
			if err != nil {
				return err
			}
			if len(acc.Choices) == 0 {
				return fmt.Errorf("worker %d turn %d: no choice", i, turn)
			}
			msg := acc.Choices[0].Message
			if (turn < c.Turns) != (len(msg.ToolCalls) > 0) {
				return fmt.Errorf("worker %d turn %d: %d tool calls", i, turn, len(msg.ToolCalls))
			}
			if len(msg.ToolCalls) == 0 {
				return nil
			}
			p.Messages = append(p.Messages, msg.ToParam())
			for _, tc := range msg.ToolCalls {
				p.Messages = append(p.Messages, osdk.ToolMessage(noopResult, tc.ID))
			}
		}
		return nil
	}, nil
}

// streamOpenAI makes one streamed call and accumulates its chunks.
func streamOpenAI(ctx context.Context, client *osdk.Client, p osdk.ChatCompletionNewParams) (*osdk.ChatCompletionAccumulator, error) {
	s := client.Chat.Completions.NewStreaming(ctx, p)
	defer s.Close()
	var acc osdk.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &acc, nil
}
