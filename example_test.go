package deputy_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
)

// Every example runs on deputy's scripted model ("fake"), its answers
// written as a scenario (docs/scenarios.md), so the output is the same on
// every run, with no network.

// A runtime on a SQLite file in a workspace, its roots holding one tool of
// the program's own (wordCount, a deputy.Tool) and nothing else.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "deputy-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{
		ModelSpec: "fake",
		Scenario: []byte(`
rules:
  - match: {turn: 1}
    tool_calls: [{name: wordcount, input: {text: "one two three"}}]
  - text: "{{index .ToolResults 0}} words"
`),
		Workspace: dir, // the database is dir/.deputy/deputy.db
		Tools:     []deputy.Tool{wordCount{}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "How many words?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.State, in.Report)
	// Output: completed 3 words
}

// A parent that hands two lookups to explorer subagents, which run in
// parallel, each in its own context, and answers from their reports.
func ExampleRuntime_Run() {
	dir, _ := os.MkdirTemp("", "deputy-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, Scenario: []byte(`
rules:
  - match: {system: "read-only explorer", last_user: "parser"}
    text: "The parser reads YAML."
  - match: {system: "read-only explorer", last_user: "writer"}
    text: "The writer emits JSON."
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "Which format does the parser read?"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "Which format does the writer emit?"}}
  - match: {turn: 2}
    text: '{{find "The parser[^.]*" (index .ToolResults 0)}}; {{find "The writer[^.]*" (index .ToolResults 1)}}.'
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "Which formats do the parser and the writer use?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	kids, _ := rt.Children(ctx, in.ID)
	fmt.Printf("%s with %d subagents: %s\n", in.State, len(kids), in.Report)
	// Output: completed with 2 subagents: The parser reads YAML; The writer emits JSON.
}

// A planned batch from Go: two lookups, then a task that receives both
// reports; the results come back as data, merged in their order.
func ExampleRuntime_FanOut() {
	dir, _ := os.MkdirTemp("", "deputy-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, Scenario: []byte(`
rules:
  - match: {system: "read-only explorer", last_user: "(?s)Reports of the tasks.*YAML.*JSON"}
    text: "They disagree."
  - match: {system: "read-only explorer", last_user: "parser"}
    text: "YAML."
  - match: {system: "read-only explorer", last_user: "writer"}
    text: "JSON."
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	res, err := rt.FanOut(ctx, deputy.FanOut{Tasks: []deputy.FanTask{
		{ID: "parser", Type: "explorer", Task: "Which format does the parser read?"},
		{ID: "writer", Type: "explorer", Task: "Which format does the writer emit?"},
		{ID: "compare", Type: "explorer", Task: "Do they agree?", DependsOn: []string{"parser", "writer"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res.Results {
		fmt.Printf("%s: %s\n", r.ID, r.Report)
	}
	// Output:
	// parser: YAML.
	// writer: JSON.
	// compare: They disagree.
}

// A root that asks its person a question waits, Asking, until it is
// answered; Wait follows it into the run the answer starts.
func ExampleRuntime_Answer() {
	dir, _ := os.MkdirTemp("", "deputy-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, Scenario: []byte(`
rules:
  - match: {turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which branch?"}}]
  - match: {turn: 2}
    text: "merged into {{index .ToolResults 0}}"
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "Merge the fix."})
	if err != nil {
		fmt.Println(err)
		return
	}
	q, _ := rt.Question(ctx, in.ID)
	fmt.Println(in.State, q)
	if err := rt.Answer(ctx, in.ID, "main"); err != nil {
		fmt.Println(err)
		return
	}
	in, err = rt.Wait(ctx, in.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.State, in.Report)
	// Output:
	// asking Which branch?
	// completed merged into main
}

// Subscribers hear every instance's events, children's included, from the
// goroutines that run them, until they unsubscribe.
func ExampleRuntime_Subscribe() {
	dir, _ := os.MkdirTemp("", "deputy-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, Scenario: []byte(`
rules:
  - match: {system: "read-only explorer"}
    text: "found it"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look here"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look there"}}
  - text: "done"
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	var mu sync.Mutex
	started := map[string]int{} // by type
	stop := rt.Subscribe(func(e deputy.Event) {
		if e.Kind == agent.EventSpawned {
			mu.Lock()
			started[e.Type]++
			mu.Unlock()
		}
	})
	defer stop()
	if _, err := rt.Run(ctx, deputy.Task{Text: "Look around."}); err != nil {
		fmt.Println(err)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(started["root"], "root,", started["explorer"], "explorers")
	// Output: 1 root, 2 explorers
}
