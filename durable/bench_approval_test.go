package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// stampTool is a side-effecting tool that notes when it runs.
type stampTool struct {
	mu   *sync.Mutex
	when *time.Time
}

func (stampTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "count", Description: "stamps", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (stampTool) ReadOnly() bool { return false }
func (s stampTool) Run(context.Context, json.RawMessage) (string, error) {
	s.mu.Lock()
	*s.when = time.Now()
	s.mu.Unlock()
	return "stamped", nil
}

// BenchmarkApprovalResume: a root's side-effecting call is held by its
// permissions (the root waits asking), then approved: from Approve to the
// approved call running in the resumed run, and to the run's end, on
// SQLite and Postgres. One JSON line per dialect, medians of the
// iterations.
func BenchmarkApprovalResume(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			ctx := context.Background()
			url := benchDB(b, dialect)
			st, err := store.Open(ctx, url, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s, err := fake.ParseScenario([]byte(approveScenario), "approve.yaml")
			if err != nil {
				b.Fatal(err)
			}
			model := fake.NewModel(s, fake.WithoutLatency())
			var mu sync.Mutex
			var ran time.Time
			pg := ""
			if st.Dialect() == store.Postgres {
				pg = url
			}
			e, err := durable.Open(ctx, durable.Options{Store: st, URL: pg,
				Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
				Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet(stampTool{&mu, &ran}) },
				Runner: agent.Runner{Permissions: &agent.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { e.Close(10 * time.Second); st.Close() }()
			ctl := durable.Control{Store: st, Engine: e}
			var toCall, toEnd []float64
			for b.Loop() {
				id, err := e.Start(ctx, "stamp", durable.Spec{System: "root", Model: "fake"})
				if err != nil {
					b.Fatal(err)
				}
				if in, err := e.Wait(ctx, id); err != nil || in.State != instance.Asking {
					b.Fatalf("%v %+v", err, in)
				}
				t0 := time.Now()
				if err := ctl.Approve(ctx, id, false); err != nil {
					b.Fatal(err)
				}
				in, err := e.Wait(ctx, id)
				if err != nil || in.State != instance.Completed || in.Report != "done: stamped" {
					b.Fatalf("%v %+v", err, in)
				}
				end := time.Now()
				mu.Lock()
				call := ran
				mu.Unlock()
				toCall, toEnd = append(toCall, float64(call.Sub(t0).Nanoseconds())), append(toEnd, float64(end.Sub(t0).Nanoseconds()))
			}
			b.ReportMetric(quantile(toCall, 0.5), "approve-to-call-ns")
			b.ReportMetric(quantile(toEnd, 0.5), "approve-to-end-ns")
			line, _ := json.Marshal(map[string]any{"bench": "approval_resume", "dialect": dialect, "n": len(toCall),
				"approve_to_call_ms": quantile(toCall, 0.5) / 1e6, "approve_to_end_ms": quantile(toEnd, 0.5) / 1e6})
			fmt.Println(string(line))
		})
	}
}
