package durable_test

// Benchmarks of waiting instances (issue 6):
//
//   - BenchmarkAskingInstances: an engine over a SQLite database holding n
//     roots that asked a question (n = 0 and 10,000; 200 with -short): its
//     heap, resident memory and goroutines while they wait, then the time
//     for all of them to be answered and run to their end.
//   - BenchmarkAskAnswer: one root asks, is answered, and resumes, on
//     SQLite and Postgres: from the answer to the resumed run's model
//     request, and to its end.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

const askBenchScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "go on?"}}]
  - match: {turn: 2}
    text: done
`

// stamping is a model that notes when each second-turn request arrives.
type stamping struct {
	llm.Model
	mu   sync.Mutex
	when map[string]time.Time // by the task text
}

func (s *stamping) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if len(req.Messages) == 3 {
		s.mu.Lock()
		s.when[req.Messages[0].Text()] = time.Now()
		s.mu.Unlock()
	}
	return s.Model.Generate(ctx, req, stream)
}

func askEngine(b *testing.B, url string) (*durable.Engine, *store.Store, *stamping) {
	b.Helper()
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(askBenchScenario), "ask.yaml")
	if err != nil {
		b.Fatal(err)
	}
	m := &stamping{Model: fake.NewModel(s, fake.WithoutLatency()), when: map[string]time.Time{}}
	pg := ""
	if st.Dialect() == store.Postgres {
		pg = url
	}
	e, err := durable.Open(context.Background(), durable.Options{Store: st, URL: pg,
		Models: func(string) (llm.Model, string, error) { return m, "fake", nil },
		Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet() },
	})
	if err != nil {
		b.Fatal(err)
	}
	return e, st, m
}

// makeAsking records a root that has asked "go on?" at its first turn, as
// a run that asked leaves it: its transcript ending with the ask_parent
// call, the question and the pending results in its mailbox, its run ended.
func makeAsking(ctx context.Context, st *store.Store, id string) error {
	def, _ := json.Marshal(durable.Spec{System: "root", Model: "fake"})
	wf := "deputy-" + id
	steps := []func() error{
		func() error {
			return st.CreateInstance(ctx, &instance.Record{ID: id, Type: "root", Definition: def, Task: id, Model: "fake"})
		},
		func() error { return st.SetWorkflow(ctx, id, wf) },
		func() error { return st.Transition(ctx, id, instance.Running, "run started") },
		func() error {
			run, err := st.StartRun(ctx, id, wf)
			if err != nil {
				return err
			}
			call := llm.ToolUse("toolu_ask", agentdef.AskTool, json.RawMessage(`{"question":"go on?"}`))
			if err := st.AppendMessages(ctx, id, 1, 0, []llm.Message{llm.UserText(id),
				{Role: llm.Assistant, Content: []llm.Block{call}}}); err != nil {
				return err
			}
			pending, _ := json.Marshal(llm.Message{Role: llm.User, Content: []llm.Block{llm.ToolResult("toolu_ask", agent.Waiting, false)}})
			if _, err := st.Post(ctx, store.Mail{InstanceID: id, Sender: id, Kind: "pending", Body: string(pending)}); err != nil {
				return err
			}
			if _, err := st.Post(ctx, store.Mail{InstanceID: id, Sender: id, Kind: durable.MailQuestion, Body: "go on?"}); err != nil {
				return err
			}
			if err := st.Transition(ctx, id, instance.Asking, "asked: go on?"); err != nil {
				return err
			}
			return st.EndRun(ctx, run.ID, "asking")
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("make %s asking: %w", id, err)
		}
	}
	return nil
}

func BenchmarkAskingInstances(b *testing.B) {
	sizes := []int{0, 10000}
	if testing.Short() {
		sizes = []int{0, 200}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("asking-%d", n), func(b *testing.B) {
			var heap, rss, gs, all, each []float64
			for b.Loop() {
				h, r, g, d := askingEngine(b, n)
				heap, rss, gs, all = append(heap, h), append(rss, r), append(gs, g), append(all, d.Seconds())
				if n > 0 {
					each = append(each, float64(d.Microseconds())/1000/float64(n))
				}
			}
			b.ReportMetric(quantile(heap, 0.5)/(1<<20), "heap-MiB")
			b.ReportMetric(quantile(rss, 0.5)/(1<<20), "rss-MiB")
			b.ReportMetric(quantile(gs, 0.5), "goroutines")
			if n > 0 {
				b.ReportMetric(quantile(all, 0.5), "answer-all-s")
				b.ReportMetric(quantile(each, 0.5), "ms/instance")
			}
		})
	}
}

// askingEngine opens an engine over n asking roots and reports its memory
// and goroutines while they wait, then answers every one and times until
// all have completed.
func askingEngine(b *testing.B, n int) (heap, rss, goroutines float64, answerAll time.Duration) {
	ctx := context.Background()
	url := filepath.Join(b.TempDir(), "deputy.db")
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-ask-%05d", i)
		if err := makeAsking(ctx, st, ids[i]); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()

	e, st, _ := askEngine(b, url)
	defer func() { e.Close(10 * time.Second); st.Close() }()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap, rss, goroutines = float64(ms.HeapInuse), float64(vmRSS()), float64(runtime.NumGoroutine())

	ctl := durable.Control{Store: st, Engine: e}
	start := time.Now()
	for _, id := range ids {
		if err := ctl.Answer(ctx, id, "yes"); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		in, err := e.Wait(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if in.State != instance.Completed || in.Report != "done" {
			b.Fatalf("%s: %s %q %s", id, in.State, in.Report, in.Error)
		}
	}
	return heap, rss, goroutines, time.Since(start)
}

// vmRSS is this process's resident memory in bytes (0 where /proc is not).
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func BenchmarkAskAnswer(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			ctx := context.Background()
			e, st, m := askEngine(b, benchDB(b, dialect))
			defer func() { e.Close(10 * time.Second); st.Close() }()
			ctl := durable.Control{Store: st, Engine: e}
			var toRequest, toEnd []float64
			i := 0
			for b.Loop() {
				i++
				task := fmt.Sprintf("ask %d", i)
				id, err := e.Start(ctx, task, durable.Spec{System: "root", Model: "fake"})
				if err != nil {
					b.Fatal(err)
				}
				if in, err := e.Wait(ctx, id); err != nil || in.State != instance.Asking {
					b.Fatalf("%v %+v", err, in)
				}
				t0 := time.Now()
				if err := ctl.Answer(ctx, id, "yes"); err != nil {
					b.Fatal(err)
				}
				in, err := e.Wait(ctx, id)
				if err != nil || in.State != instance.Completed {
					b.Fatalf("%v %+v", err, in)
				}
				end := time.Now()
				m.mu.Lock()
				req := m.when[task]
				m.mu.Unlock()
				toRequest, toEnd = append(toRequest, float64(req.Sub(t0).Nanoseconds())), append(toEnd, float64(end.Sub(t0).Nanoseconds()))
			}
			b.ReportMetric(quantile(toRequest, 0.5), "answer-to-request-ns")
			b.ReportMetric(quantile(toRequest, 0.99), "p99-answer-to-request-ns")
			b.ReportMetric(quantile(toEnd, 0.5), "answer-to-end-ns")
		})
	}
}
