package durable_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
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
	if in.State != store.Completed || !strings.HasPrefix(in.Report, "done: subagent ") || in.Turns != 3 || runs.Load() != 1 {
		t.Fatalf("instance %+v, count ran %d times", in, runs.Load())
	}
	msgs, err := st.Transcript(ctx, id)
	if err != nil || len(msgs) != 6 {
		t.Fatalf("transcript: %d messages, %v", len(msgs), err)
	}
	kids, err := st.ListInstances(ctx, store.Filter{Parent: id})
	if err != nil || len(kids) != 1 || kids[0].State != store.Completed || kids[0].Type != "explorer" {
		t.Fatalf("children %+v %v", kids, err)
	}
	kt, _ := st.Transcript(ctx, kids[0].ID)
	if len(kt) != 2 || kt[1].Text() != "Conclusion: looked." {
		t.Errorf("child transcript %+v", kt)
	}
}
