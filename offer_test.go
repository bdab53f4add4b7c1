package deputy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
)

// delegator is a program's model playing a parent that asks its person
// once, then hands the counting to a counter child, and the child: it
// keeps what each request offered, by role.
type delegator struct {
	mu       sync.Mutex
	parent   [][]string
	children [][]string
}

func (d *delegator) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	var results []string
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == llm.TypeToolResult {
				results = append(results, b.Text)
			}
		}
	}
	call := func(name, input string) (*llm.Response, error) {
		return &llm.Response{Content: []llm.Block{llm.ToolUse("call-"+name, name, json.RawMessage(input))},
			StopReason: llm.StopToolUse}, nil
	}
	text := func(s string) (*llm.Response, error) {
		return &llm.Response{Content: []llm.Block{llm.Text(s)}, StopReason: llm.StopEndTurn}, nil
	}
	d.mu.Lock()
	child := strings.Contains(req.System, "You count words")
	if child {
		d.children = append(d.children, names)
	} else {
		d.parent = append(d.parent, names)
	}
	d.mu.Unlock()
	switch {
	case child && len(results) == 0:
		return call("wordcount", `{"text":"one two three"}`)
	case child:
		return text(results[0] + " words")
	case len(results) == 0:
		return call("ask_parent", `{"question":"Count it?"}`)
	case len(results) == 1:
		return call("spawn_subagent", `{"subagent_type":"counter","task":"count"}`)
	}
	return text("counted: " + results[1])
}

// A parent holds tools for its children that its own model is not offered:
// Options.Offer names exactly what it sees, over both of its runs (the
// second, after the answer, rebuilt from what the root recorded), and the
// child of a type that lists the held tool is offered exactly that.
func TestOfferKeepsHeldToolsFromTheParent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	m := &delegator{}
	counter := &deputy.Definition{Name: "counter", Description: "Counts words.", SystemPrompt: "You count words.",
		Tools: []string{"wordcount"}}
	rt, err := deputy.Open(ctx, deputy.Options{Model: m, Workspace: dir, DB: filepath.Join(dir, "d.db"),
		Tools: []deputy.Tool{wordCount{}}, Definitions: []*deputy.Definition{counter},
		Offer: []string{"spawn_subagent", "ask_parent"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "count"})
	if err != nil || in.State != deputy.Asking {
		t.Fatalf("%v %+v", err, in)
	}
	if err := rt.Answer(ctx, in.ID, "yes"); err != nil {
		t.Fatal(err)
	}
	if in, err = rt.Wait(ctx, in.ID); err != nil || in.State != deputy.Completed || !strings.Contains(in.Report, "3 words") {
		t.Fatalf("%v %+v", err, in)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.parent) != 3 {
		t.Fatalf("%d parent requests, want 3 over two runs", len(m.parent))
	}
	for i, names := range m.parent {
		if !slices.Equal(names, []string{"spawn_subagent", "ask_parent"}) {
			t.Errorf("parent request %d offered %v", i, names)
		}
	}
	for i, names := range m.children {
		if !slices.Equal(names, []string{"wordcount"}) {
			t.Errorf("child request %d offered %v", i, names)
		}
	}
	// A name the root neither holds nor is deputy's is refused before
	// anything is recorded, saying which.
	before, err := rt.List(ctx, deputy.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Start(ctx, deputy.Task{Text: "count", Offer: []string{"spawn_subagent", "nosuch"}})
	if !errors.Is(err, deputy.ErrRefused) || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "Options.Tools") {
		t.Errorf("a bad offer: %v", err)
	}
	if after, err := rt.List(ctx, deputy.Filter{}); err != nil || len(after) != len(before) {
		t.Errorf("a bad offer recorded an instance: %d then %d (%v)", len(before), len(after), err)
	}
	o := deputy.Options{ModelSpec: "fake", Workspace: dir, DB: filepath.Join(dir, "queued.db"), Offer: []string{"nosuch"}}
	if _, err := deputy.Enqueue(ctx, o, deputy.Task{Text: "count"}); !errors.Is(err, deputy.ErrRefused) {
		t.Errorf("Enqueue with a bad Options.Offer: %v", err)
	}
	// With RunTools the names may be its tools: the run's start checks them.
	o.RunTools = func(deputy.Site) ([]deputy.Tool, error) { return nil, nil }
	if _, err := deputy.Enqueue(ctx, o, deputy.Task{Text: "count"}); err != nil {
		t.Errorf("Enqueue with RunTools: %v", err)
	}
}

// With Stream the model calls stream, and their deltas reach OnEvent; the
// roots' provider is reached over HTTP with the key given in code.
func TestStreamDeliversDeltas(t *testing.T) {
	t.Parallel()
	const key = "sk-stream-1"
	srv := fake.NewServer(fake.Options{APIKey: key})
	root, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var deltas atomic.Int64
	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "openai:fake", Stream: true,
		Provider:  deputy.ProviderOptions{BaseURL: root + "/v1", APIKey: key, HTTPClient: &http.Client{}},
		Workspace: dir, DB: filepath.Join(dir, "d.db"),
		OnEvent: func(e deputy.Event) {
			if e.Kind == agent.EventStep && e.Loop.Kind == loop.EventModelDelta {
				deltas.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "hello"})
	if err != nil || in.State != deputy.Completed {
		t.Fatalf("%v %+v", err, in)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !reqs[0].Stream || deltas.Load() == 0 {
		t.Errorf("%d requests (streamed: %v), %d deltas", len(reqs), len(reqs) > 0 && reqs[0].Stream, deltas.Load())
	}
}
