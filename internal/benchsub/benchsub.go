// Package benchsub holds the workloads of the subagent benchmarks of issue 4,
// shared by `deputy-bench subagents` and this package's quick test, so the
// command's figures come from code that is itself tested:
//
//   - Economy (a): what children that read a lot cost the parent's context;
//   - ForkReuse (b): how much of a fork child's first request is the
//     parent's cached prefix;
//   - FanOut (d): wall time of a wide tree against the ideal, beside bare
//     loops of model calls.
//
// (The spawn overhead, c, is `go test -bench Spawn ./agent`.)
//
// Every workload runs a real agent.Runner through the real Anthropic or
// OpenAI provider against deputy's fake model server on loopback HTTP, in
// this process so that its request log can be read: the figures are taken
// from what the server received (llm.EstimateRequest of each logged request
// is the prompt the server counted) and from the usage it answered.
package benchsub

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// Wires are the providers a workload can run through.
var Wires = []string{"anthropic", "openai"}

// ModelName is the model every workload asks the fake server for.
const ModelName = "fake-model"

// server is a fake model server on loopback, serving one scenario.
type server struct {
	srv   *fake.Server
	url   string
	close func() error
	// client is the HTTP client the models use; its idle connections are
	// closed with the server so that nothing outlives a workload.
	client    *http.Client
	transport *http.Transport
}

// startServer serves scenario on 127.0.0.1. idle bounds the keep-alive
// connections kept per host: a fan-out of 50 parallel calls needs 50, where
// Go's default of 2 would close and redial most of them on every call.
func startServer(scenario, name string, minCache, idle int) (*server, error) {
	s, err := fake.ParseScenario([]byte(scenario), name)
	if err != nil {
		return nil, fmt.Errorf("benchmark scenario: %w", err)
	}
	srv := fake.NewServer(fake.Options{Responder: s, MinCacheTokens: minCache})
	url, closeFn, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(idle, 2)
	return &server{srv: srv, url: url, close: closeFn, client: &http.Client{Transport: tr}, transport: tr}, nil
}

func (s *server) stop() {
	s.transport.CloseIdleConnections()
	_ = s.close()
}

// model opens deputy's provider for wire against the server.
func (s *server) model(wire string) (llm.Model, error) {
	switch wire {
	case "anthropic":
		return anthropic.New(ModelName, anthropic.Options{APIKey: "bench", BaseURL: s.url, HTTPClient: s.client})
	case "openai":
		return openai.New(ModelName, openai.Options{APIKey: "bench", BaseURL: s.url + "/v1", HTTPClient: s.client})
	}
	return nil, fmt.Errorf("unknown wire %q (have: %s)", wire, strings.Join(Wires, ", "))
}

// workspace is a temporary directory with the built-in tools over it.
type workspace struct {
	dir   string
	tools *tool.Set
}

// newWorkspace writes files (name → content) into a new temporary
// directory; the caller removes it with remove.
func newWorkspace(files map[string]string) (*workspace, error) {
	dir, err := os.MkdirTemp("", "deputy-benchsub")
	if err != nil {
		return nil, err
	}
	ws := &workspace{dir: dir}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			ws.remove()
			return nil, err
		}
	}
	tools, err := builtin.Tools(builtin.Config{Workspace: dir})
	if err != nil {
		ws.remove()
		return nil, err
	}
	if ws.tools, err = tool.NewSet(tools...); err != nil {
		ws.remove()
		return nil, err
	}
	return ws, nil
}

func (w *workspace) remove() { _ = os.RemoveAll(w.dir) }

// rig is a workload's world: a workspace of files, the fake server playing
// its scenario, and the model for one wire talking to it.
type rig struct {
	ws    *workspace
	srv   *server
	model llm.Model
}

func newRig(files map[string]string, scenario, name string, minCache, idle int, wire string) (*rig, error) {
	ws, err := newWorkspace(files)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(scenario, name, minCache, idle)
	if err != nil {
		ws.remove()
		return nil, err
	}
	model, err := srv.model(wire)
	if err != nil {
		srv.stop()
		ws.remove()
		return nil, err
	}
	return &rig{ws: ws, srv: srv, model: model}, nil
}

func (r *rig) close() {
	r.srv.stop()
	r.ws.remove()
}

// corpus returns n bytes of text in lines of about 90 characters, the same
// for the same seed: what a child reads. Words vary so the text looks like
// prose to a reader and is not one repeated line.
func corpus(n, seed int) string {
	words := []string{"parser", "returns", "the", "token", "stream", "of", "a", "file", "and", "records",
		"each", "position", "so", "that", "errors", "name", "their", "line", "when", "scanner", "meets",
		"an", "unknown", "byte", "it", "reports", "cache", "entry", "handler", "request", "budget", "turn"}
	var b strings.Builder
	b.Grow(n + 100)
	x := uint32(seed)*2654435761 + 1
	line := 0
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		w := words[x%uint32(len(words))]
		if line > 0 && line+1+len(w) > 90 {
			b.WriteByte('\n')
			line = 0
		}
		if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	s := b.String()[:n]
	return strings.TrimRight(s, " \n") + "\n"
}

// usageRecorder keeps, per instance, the usage of each model response, from
// the runner's events.
type usageRecorder struct {
	mu    sync.Mutex
	first map[string]llm.Usage // instance id → its first response's usage
}

func (u *usageRecorder) observe(e agent.Event) {
	if e.Kind != agent.EventStep || e.Loop.Kind != loop.EventModelResponse || e.Loop.Turn != 1 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.first == nil {
		u.first = map[string]llm.Usage{}
	}
	if _, ok := u.first[e.Instance]; !ok {
		u.first[e.Instance] = e.Loop.Usage
	}
}

func (u *usageRecorder) firstOf(id string) (llm.Usage, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x, ok := u.first[id]
	return x, ok
}

// runTimeout bounds one workload run, so a stuck benchmark fails instead of
// hanging.
const runTimeout = 10 * time.Minute

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, runTimeout)
}

// lastUserText is the text of the last user message of a request.
func lastUserText(r *llm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == llm.User {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// toolResults returns the tool results of a request's last message.
func toolResults(r *llm.Request) []llm.Block {
	if len(r.Messages) == 0 {
		return nil
	}
	var out []llm.Block
	for _, b := range r.Messages[len(r.Messages)-1].Content {
		if b.Type == llm.TypeToolResult {
			out = append(out, b)
		}
	}
	return out
}

// Timing is what a fan-out or an orchestration run measured, on one clock.
type Timing struct {
	// Wall is the run's wall time; Ideal is the time the workload's
	// latency alone takes with perfect parallelism (the config's Ideal).
	Wall  time.Duration `json:"wall_ns"`
	Ideal time.Duration `json:"ideal_ns"`
	Ratio float64       `json:"wall_over_ideal"`
	// PeakRunning is the most workers that ran at once.
	PeakRunning int `json:"peak_running"`
	// Requests is the generation requests in the server's log.
	Requests int `json:"requests"`
	// The run in phases, from the root's events, when there is a root: its
	// first turn (the request, and its calls streamed back), the
	// children's phase (from that response to the root's second turn), and
	// its last turn.
	RootFirst  time.Duration `json:"root_first_turn_ns,omitempty"`
	Children   time.Duration `json:"children_phase_ns,omitempty"`
	RootSecond time.Duration `json:"root_second_turn_ns,omitempty"`
}

// phases sets the root's phases from its four events: turn 1 starts, its
// response, turn 2 starts, its response.
func (t *Timing) phases(ev []time.Duration) {
	t.RootFirst, t.Children, t.RootSecond = ev[1]-ev[0], ev[2]-ev[1], ev[3]-ev[2]
}

// settle finishes a run's figures once Wall and Ideal are in (the ratio,
// the requests in srv's log) and holds the log to want, the requests the
// workload makes.
func (t *Timing) settle(srv *server, want int) error {
	t.Ratio = ratio(float64(t.Wall), float64(t.Ideal))
	for _, lr := range srv.srv.Requests() {
		if lr.N > 0 {
			t.Requests++
		}
	}
	if t.Requests != want {
		return fmt.Errorf("%d requests in the log, want %d", t.Requests, want)
	}
	return nil
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
