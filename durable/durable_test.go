package durable_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const scenario = `
rules:
  - match: {system: "read-only explorer"}
    text: "Conclusion: looked."
  - match: {turn: 1}
    text: "Looking, and counting."
    tool_calls:
      - {name: glob, input: {pattern: "*"}}
      - {name: count, input: {}}
  - match: {turn: 2}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "look around"}}]
  - match: {turn: 3}
    text: "done: {{index .ToolResults 0}}"
`

// counter is a side-effecting tool that counts its runs.
type counter struct{ n *atomic.Int64 }

func (c counter) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "count", Description: "counts", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (c counter) ReadOnly() bool { return false }
func (c counter) Run(context.Context, json.RawMessage) (string, error) {
	return "count " + string(rune('0'+c.n.Add(1))), nil
}

func open(t *testing.T, dbPath string, runs *atomic.Int64) (*durable.Engine, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(scenario), "durable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	model := fake.NewModel(s, fake.WithoutLatency())
	e, err := durable.Open(context.Background(), durable.Options{
		Store:  st,
		Models: func(spec string) (llm.Model, string, error) { return model, "fake", nil },
		Tools: func(sp durable.Spec) (*tool.Set, error) {
			ts, err := builtin.Tools(builtin.Config{Workspace: sp.Workspace})
			if err != nil {
				return nil, err
			}
			return tool.NewSet(append(ts, counter{runs})...)
		},
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	return e, st
}

func TestRunIsRecorded(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644)
	var runs atomic.Int64
	e, st := open(t, filepath.Join(t.TempDir(), "deputy.db"), &runs)
	ctx := context.Background()
	id, err := e.Start(ctx, "do it", durable.Spec{System: "root", Model: "fake", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != instance.Completed || !strings.HasPrefix(in.Report, "done: subagent ") || in.Turns != 3 || runs.Load() != 1 {
		t.Fatalf("instance %+v, count ran %d times", in, runs.Load())
	}
	msgs, err := st.Transcript(ctx, id)
	if err != nil || len(msgs) != 6 {
		t.Fatalf("transcript: %d messages, %v", len(msgs), err)
	}
	kids, err := st.ListInstances(ctx, store.Filter{Parent: id})
	if err != nil || len(kids) != 1 || kids[0].State != instance.Completed || kids[0].Type != "explorer" {
		t.Fatalf("children %+v %v", kids, err)
	}
	kt, _ := st.Transcript(ctx, kids[0].ID)
	if len(kt) != 2 || kt[1].Text() != "Conclusion: looked." {
		t.Errorf("child transcript %+v", kt)
	}
}

func TestCatalogRefreshPicksUpAPutDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(`
rules:
  - match: {system: "You are the newbie"}
    text: "newbie here"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: newbie, task: "hi"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`), "refresh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	model := fake.NewModel(s, fake.WithoutLatency())
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var problems [][]error
	var mu sync.Mutex
	e, err := durable.Open(ctx, durable.Options{
		Store: st, Clock: clk, RefreshInterval: time.Minute,
		Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet() },
		OnRefresh: func(errs []error) {
			mu.Lock()
			problems = append(problems, errs)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	if _, ok := e.Catalog().Lookup("newbie"); ok {
		t.Fatal("newbie exists before it was put")
	}
	def, _ := json.Marshal(agentdef.Definition{Name: "newbie", Description: "a new type", SystemPrompt: "You are the newbie.", Tools: []string{}})
	if err := st.PutDefinition(ctx, "newbie", "---\nname: newbie\n---\n", def); err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(agentdef.Definition{Name: "broken", Description: "x", Mode: "sideways"})
	if err := st.PutDefinition(ctx, "broken", "", bad); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Catalog().Lookup("newbie"); ok {
		t.Fatal("the catalog refreshed before its interval")
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.WaitPending(wctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute) // the refresh runs before Advance returns
	if d, ok := e.Catalog().Lookup("newbie"); !ok || d.Source.Level != agentdef.LevelDatabase {
		t.Fatalf("newbie after the refresh: %+v %v", d, ok)
	}
	mu.Lock()
	last := problems[len(problems)-1]
	mu.Unlock()
	if len(last) != 1 || !strings.Contains(last[0].Error(), "sideways") {
		t.Errorf("refresh problems %v", last)
	}
	// A run started now can spawn the new type, with no restart.
	id, err := e.Start(ctx, "go", durable.Spec{System: "root", Model: "fake", Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.Wait(ctx, id)
	if err != nil || in.State != instance.Completed || !strings.Contains(in.Report, "newbie here") {
		t.Fatalf("run: %+v %v", in, err)
	}
}

func TestCompactionIsPersistedAndOriginalsStay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("lorem ipsum dolor ", 200)), 0o644)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(`
rules:
  - match: {system: "compress an agent's working transcript"}
    text: "SUMMARY of the reading"
  - match: {tool_result: "lorem"}
    times: 5
    tool_calls: [{name: read_file, input: {path: big.txt}}]
  - match: {turn: 1}
    tool_calls: [{name: read_file, input: {path: big.txt}}]
  - text: "done"
`), "compact.yaml")
	if err != nil {
		t.Fatal(err)
	}
	model := fake.NewModel(s, fake.WithoutLatency())
	e, err := durable.Open(ctx, durable.Options{
		Store:  st,
		Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools: func(sp durable.Spec) (*tool.Set, error) {
			ts, err := builtin.Tools(builtin.Config{Workspace: sp.Workspace})
			if err != nil {
				return nil, err
			}
			return tool.NewSet(ts...)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	id, err := e.Start(ctx, "read a lot", durable.Spec{System: "root", Model: "fake", Workspace: ws,
		Compaction: loop.Compaction{ContextWindow: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.Wait(ctx, id)
	if err != nil || in.State != instance.Completed {
		t.Fatalf("%+v %v", in, err)
	}
	cs, err := st.Compactions(ctx, id)
	if err != nil || len(cs) == 0 || !strings.Contains(cs[0].Summary, "SUMMARY of the reading") {
		t.Fatalf("compactions %+v %v", cs, err)
	}
	msgs, _ := st.Transcript(ctx, id)
	// All 7 turns stay in the store: task, 6 × (call, result), answer.
	if len(msgs) != 1+12+1 || msgs[len(msgs)-1].Text() != "done" {
		t.Fatalf("%d stored messages", len(msgs))
	}
	if c := cs[0]; c.ThroughSeq <= 0 || c.ThroughSeq >= len(msgs)-1 || msgs[c.ThroughSeq].Role != llm.User {
		t.Errorf("compaction through seq %d of %d", c.ThroughSeq, len(msgs))
	}
}

func TestAdoptStartsARootLeftCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var runs atomic.Int64
	e, st := open(t, filepath.Join(t.TempDir(), "deputy.db"), &runs)
	// What a process that died between recording and starting leaves.
	spec, _ := json.Marshal(durable.Spec{System: "root", Model: "fake", Workspace: t.TempDir()})
	if err := st.CreateInstance(ctx, &instance.Record{ID: "i-orphan", Type: "root", Definition: spec, Task: "do it", Model: "fake"}); err != nil {
		t.Fatal(err)
	}
	n, err := e.Adopt(ctx)
	if err != nil || n != 1 {
		t.Fatalf("adopted %d: %v", n, err)
	}
	in, err := e.Wait(ctx, "i-orphan")
	if err != nil || in.State != instance.Completed {
		t.Fatalf("%+v %v", in, err)
	}
	if n, err := e.Adopt(ctx); err != nil || n != 0 {
		t.Fatalf("second adopt: %d %v", n, err)
	}
}
