package costbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/internal/pgtest"
	dopenai "github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

const (
	modelName    = "gpt-4o-mini"
	workerSystem = "You are a cost-benchmark worker."
)

// clientResult is what a client process reports to the harness (as JSON in
// the file COSTBENCH_OUT names): the workload's own figures, from its start
// to its end, setup (opening the runtime, starting Postgres) left out.
type clientResult struct {
	WallMS   float64 `json:"wall_ms"`
	CPUMS    float64 `json:"cpu_ms"` // getrusage(RUSAGE_SELF), user + system
	Mallocs  uint64  `json:"mallocs"`
	Requests int64   `json:"requests"` // HTTP requests the client sent
	Deltas   int64   `json:"deltas"`   // model_delta events a consumer got
}

// TestCostClient is a client process's whole work: the harness runs the
// test binary with COSTBENCH_ROLE=client and -test.run naming this test,
// so Postgres (pgtest) starts in this process as it would in a program.
func TestCostClient(t *testing.T) {
	if os.Getenv("COSTBENCH_ROLE") != "client" {
		t.Skip("a client process's role; the harness (BenchmarkCost, TestHarness) starts it")
	}
	w, err := WorkloadFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg, url, out := os.Getenv("COSTBENCH_CONFIG"), os.Getenv("COSTBENCH_URL"), os.Getenv("COSTBENCH_OUT")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hc := newCountingClient(w)
	defer hc.transport.CloseIdleConnections()

	var deltas atomic.Int64
	var run func(context.Context) error
	switch cfg {
	case "bare-plain", "bare-stream":
		run = bareRun(hc.Client, url, w, cfg == "bare-stream")
	case "memory", "memory-stream":
		run, err = memoryRun(hc.Client, url, w, cfg == "memory-stream", &deltas)
	case "sqlite":
		run, err = durableRun(ctx, t, hc.Client, url, w, filepath.Join(t.TempDir(), "deputy.db"))
	case "postgres":
		run, err = durableRun(ctx, t, hc.Client, url, w, pgtest.URL(t))
	default:
		err = fmt.Errorf("unknown config %q", cfg)
	}
	if err != nil {
		t.Fatalf("%s: %v", cfg, err)
	}

	if p := os.Getenv("COSTBENCH_PROFILE"); p != "" {
		f, err := os.Create(p + "-" + cfg + ".pprof")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	var ruBefore, ruAfter syscall.Rusage
	runtime.ReadMemStats(&before)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ruBefore); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = run(ctx)
	wall := time.Since(start)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ruAfter); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if p := os.Getenv("COSTBENCH_PROFILE"); p != "" {
		pprof.StopCPUProfile()
		// The allocations too (go tool pprof -sample_index=alloc_space):
		// at the default sampling rate, which the run's figures include
		// anyway.
		if f, err := os.Create(p + "-" + cfg + ".allocs"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", cfg, err)
	}
	res := clientResult{
		WallMS:   float64(wall.Microseconds()) / 1000,
		CPUMS:    float64(cpuOf(ruAfter)-cpuOf(ruBefore)) / 1e6,
		Mallocs:  after.Mallocs - before.Mallocs,
		Requests: hc.requests.Load(),
		Deltas:   deltas.Load(),
	}
	if res.Requests != int64(w.Calls()) {
		t.Fatalf("%s: %d HTTP requests, want %d (%d children × %d turns)", cfg, res.Requests, w.Calls(), w.N, w.Turns)
	}
	raw, _ := json.Marshal(res)
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func cpuOf(ru syscall.Rusage) int64 { return ru.Utime.Nano() + ru.Stime.Nano() }

// countingClient is every configuration's HTTP client: one transport that
// keeps enough idle connections for the children at once (net/http's
// default keeps two per host, which would make every configuration dial
// anew), counting the requests it sends.
type countingClient struct {
	*http.Client
	transport *http.Transport
	requests  atomic.Int64
}

func newCountingClient(w Workload) *countingClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = w.MaxParallel + 8
	c := &countingClient{transport: tr}
	c.Client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.requests.Add(1)
		return tr.RoundTrip(r)
	})}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// inParallel runs fn(0..n-1), at most limit at once, and returns the first
// error any returned.
func inParallel(n, limit int, fn func(i int) error) error {
	errs := make(chan error, n)
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// bareRun is the floor: N goroutines × T openai-go chat completions, the
// noop tool offered, its call answered by the loop itself, as a program
// on the SDK alone would.
func bareRun(hc *http.Client, url string, w Workload, stream bool) func(context.Context) error {
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	spec := benchloop.Noop{}.Spec()
	var params shared.FunctionParameters
	if err := json.Unmarshal(spec.InputSchema, &params); err != nil {
		panic(err) // a constant schema
	}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: spec.Name, Description: openai.String(spec.Description), Parameters: params})}
	return func(ctx context.Context) error {
		return inParallel(w.N, w.MaxParallel, func(i int) error {
			p := openai.ChatCompletionNewParams{Model: modelName, Tools: tools,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(workerSystem), openai.UserMessage(fmt.Sprintf("part %d", i))}}
			if stream {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			for turn := 1; turn <= w.Turns; turn++ {
				msg, err := bareCall(ctx, &c, p, stream)
				if err != nil {
					return fmt.Errorf("child %d turn %d: %w", i, turn, err)
				}
				if (turn < w.Turns) != (len(msg.ToolCalls) > 0) {
					return fmt.Errorf("child %d turn %d: %d tool calls", i, turn, len(msg.ToolCalls))
				}
				if len(msg.ToolCalls) == 0 {
					if want := fmt.Sprintf("Done after %d turns.", w.Turns); msg.Content != want {
						return fmt.Errorf("child %d: answer %q, want %q", i, msg.Content, want)
					}
					return nil
				}
				p.Messages = append(p.Messages, msg.ToParam())
				for _, tc := range msg.ToolCalls {
					out, err := benchloop.Noop{}.Run(ctx, json.RawMessage(tc.Function.Arguments))
					if err != nil {
						return err
					}
					p.Messages = append(p.Messages, openai.ToolMessage(out, tc.ID))
				}
			}
			return nil
		})
	}
}

func bareCall(ctx context.Context, c *openai.Client, p openai.ChatCompletionNewParams, stream bool) (*openai.ChatCompletionMessage, error) {
	if !stream {
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			return nil, err
		}
		if len(r.Choices) == 0 {
			return nil, fmt.Errorf("no choice")
		}
		return &r.Choices[0].Message, nil
	}
	s := c.Chat.Completions.NewStreaming(ctx, p)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(acc.Choices) == 0 {
		return nil, fmt.Errorf("no choice")
	}
	return &acc.Choices[0].Message, nil
}

// worker is the children's type: isolated, the noop tool only.
func worker() *agentdef.Definition {
	return &agentdef.Definition{Name: "worker", Description: "Processes one part.", SystemPrompt: workerSystem,
		Tools: []string{"noop"}, Mode: agentdef.ModeIsolated}
}

func fanTasks(w Workload) []agent.FanTask {
	tasks := make([]agent.FanTask, w.N)
	for i := range tasks {
		tasks[i] = agent.FanTask{ID: fmt.Sprintf("t%d", i), Type: "worker", Task: fmt.Sprintf("part %d", i)}
	}
	return tasks
}

// checkResults checks every task completed with the scripted answer.
func checkResults(w Workload, rs []agent.FanResult) error {
	if len(rs) != w.N {
		return fmt.Errorf("%d results, want %d", len(rs), w.N)
	}
	want := fmt.Sprintf("Done after %d turns.", w.Turns)
	for _, r := range rs {
		if r.State != deputy.Completed || !strings.Contains(r.Report, want) {
			return fmt.Errorf("task %s: %s, report %q, want completed with %q", r.ID, r.State, r.Report, want)
		}
	}
	return nil
}

// memoryRun is deputy in memory: one agent.Runner root on the planner
// model (it makes no model call: it calls fan_out with its plan) whose N
// isolated children run on deputy's openai provider, as deputy.FanOut's
// durable root does. stream: Runner.Stream with a consumer of the deltas,
// as a live display would be; without, the provider is built NonStreaming
// (as deputy.Open builds it when Options.Stream is off) and the Runner asks
// for no deltas, so every call is the plain one, like bare-plain's.
func memoryRun(hc *http.Client, url string, w Workload, stream bool, deltas *atomic.Int64) (func(context.Context) error, error) {
	m, err := dopenai.New(modelName, dopenai.Options{APIKey: "k", BaseURL: url + "/v1", HTTPClient: hc, NonStreaming: !stream})
	if err != nil {
		return nil, err
	}
	r := &agent.Runner{MaxParallel: w.MaxParallel, Stream: stream}
	if stream {
		r.OnEvent = func(e agent.Event) {
			if e.Kind == agent.EventStep && e.Loop.Kind == loop.EventModelDelta {
				deltas.Add(1)
			}
		}
	}
	var in agent.FanOutInput
	in.Format = "json"
	for _, t := range fanTasks(w) {
		in.Tasks = append(in.Tasks, agent.FanTaskInput{FanTask: t})
	}
	plan, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	task := agent.Task{Task: string(plan), Model: agent.Planner{}, ModelName: agent.PlannerModel,
		Tools: tool.MustSet(benchloop.Noop{}), Volatile: []*agentdef.Definition{worker()},
		Inherited: &agent.ModelRef{Model: m, Name: modelName, Spec: "openai:" + modelName}}
	return func(ctx context.Context) error {
		o, err := r.Run(ctx, task)
		if err != nil {
			return err
		}
		// The root's answer is fan_out's result, cut to the tool output
		// limit at 1,000 tasks: the children's own records say how each
		// ended.
		rs := make([]agent.FanResult, 0, w.N)
		for _, in := range o.Instances[1:] {
			rs = append(rs, agent.FanResult{ID: in.ID, State: in.State, Report: in.Report})
		}
		return checkResults(w, rs)
	}, nil
}

// durableRun is deputy durable through its public API: deputy.Open on db
// (a SQLite file or a Postgres URL) and one FanOut of the N tasks, the
// root a planner as in memoryRun. Opening is setup, not measured; the
// runtime is closed when the test ends.
func durableRun(ctx context.Context, t *testing.T, hc *http.Client, url string, w Workload, db string) (func(context.Context) error, error) {
	rt, err := deputy.Open(ctx, deputy.Options{
		ModelSpec: "openai:" + modelName,
		Provider:  deputy.ProviderOptions{HTTPClient: hc, BaseURL: url + "/v1", APIKey: "k"},
		Workspace: t.TempDir(), DB: db,
		Tools:       []deputy.Tool{benchloop.Noop{}},
		Definitions: []*deputy.Definition{worker()},
		MaxParallel: w.MaxParallel, MaxRuns: w.MaxParallel + 1,
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return func(ctx context.Context) error {
		// Start and Wait, not FanOut: WaitFanOut parses the root's report,
		// fan_out's result, which the tool output limit cuts at a few
		// hundred tasks. The children's records say how each ended.
		id, err := rt.StartFanOut(ctx, deputy.FanOut{Tasks: fanTasks(w), MaxParallel: w.MaxParallel})
		if err != nil {
			return err
		}
		root, err := rt.Wait(ctx, id)
		if err != nil {
			return err
		}
		if root.State != deputy.Completed {
			return fmt.Errorf("fan-out %s: %s: %s", id, root.State, root.Error)
		}
		kids, err := rt.Children(ctx, id)
		if err != nil {
			return err
		}
		rs := make([]agent.FanResult, 0, len(kids))
		for _, k := range kids {
			rs = append(rs, agent.FanResult{ID: k.ID, State: k.State, Report: k.Report})
		}
		return checkResults(w, rs)
	}, nil
}
