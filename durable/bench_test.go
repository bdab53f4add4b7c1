//go:build unix

package durable_test

// Issue 5's benchmarks (figures in docs/benchmarks.md, "Durable instances"):
//
//   - BenchmarkDurableTurn: the durable engine's cost per turn against the
//     in-memory loop on the same workload, p50 and p99, SQLite and Postgres.
//   - BenchmarkTurnParts: what a durable turn is made of: one trivial DBOS
//     step and one transcript append, each timed alone.
//   - BenchmarkRecovery: a real `deputy run` killed by SIGKILL at a step
//     boundary, then `deputy worker`: the time to the resumed run's next
//     model request, and where it goes.
//   - BenchmarkPausedInstances: a `deputy worker` on a database with 0 or
//     10,000 paused instances: its memory and goroutines once idle.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// benchTurns is the loop benchmark's run length: nine turns of one no-op
// tool call, then an answer.
const benchTurns = 10

// benchDB returns a fresh database of the dialect: a SQLite file, or a new
// database on the test Postgres server.
func benchDB(b *testing.B, dialect string) string {
	if dialect == "postgres" {
		return pgtest.URL(b)
	}
	return filepath.Join(b.TempDir(), "deputy.db")
}

// turnTimer times a root's turns from its loop events: a turn lasts from
// its turn_started to the next one's, so it holds the model call, the tool
// call and everything recorded about them. The last turn (the answer) has
// no next turn and is not timed.
//
// It also splits a turn into its phases, from one loop event to the next
// (events come before what they announce is recorded, so the time from an
// event to the next holds the recording): generate (turn_started to
// model_response: the model call and its checkpoint), append-call
// (the assistant's message to tool_call: its transcript write), tool
// (tool_call to tool_result: the call and its checkpoint), append-result
// (the tool result's message to the next turn_started).
type turnTimer struct {
	mu     sync.Mutex
	last   time.Time // the last turn_started
	prev   time.Time // the last event's time
	prevK  loop.EventKind
	role   llm.Role // of the last message event
	turns  []time.Duration
	phases map[string][]float64
}

func (t *turnTimer) event(ev agent.Event) {
	if ev.Kind != agent.EventStep || ev.Parent != "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.prev.IsZero() {
		phase, from := "", t.prev
		switch {
		case ev.Loop.Kind == loop.EventModelResponse && !t.last.IsZero():
			phase, from = "generate", t.last // model_delta events come between
		case t.prevK == loop.EventMessage && t.role == llm.Assistant && ev.Loop.Kind == loop.EventToolCall:
			phase = "append-call"
		case t.prevK == loop.EventToolCall && ev.Loop.Kind == loop.EventToolResult:
			phase = "tool"
		case t.prevK == loop.EventMessage && t.role == llm.User && ev.Loop.Kind == loop.EventTurnStarted:
			phase = "append-result"
		}
		if phase != "" {
			if t.phases == nil {
				t.phases = map[string][]float64{}
			}
			t.phases[phase] = append(t.phases[phase], float64(now.Sub(from).Nanoseconds()))
		}
	}
	t.prev, t.prevK = now, ev.Loop.Kind
	if ev.Loop.Kind == loop.EventMessage {
		t.role = ev.Loop.Message.Role
	}
	if ev.Loop.Kind != loop.EventTurnStarted {
		return
	}
	if !t.last.IsZero() {
		t.turns = append(t.turns, now.Sub(t.last))
	}
	t.last = now
}

// newRun forgets the previous run's last events.
func (t *turnTimer) newRun() {
	t.mu.Lock()
	t.last, t.prev = time.Time{}, time.Time{}
	t.mu.Unlock()
}

// reset forgets everything measured.
func (t *turnTimer) reset() {
	t.mu.Lock()
	t.turns, t.phases = nil, nil
	t.mu.Unlock()
}

// phase is the q-quantile of one phase's durations.
func (t *turnTimer) phase(name string, q float64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return quantile(t.phases[name], q)
}

// mean is the turns' mean duration.
func (t *turnTimer) mean() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum time.Duration
	for _, d := range t.turns {
		sum += d
	}
	return float64(sum.Nanoseconds()) / float64(len(t.turns))
}

func (t *turnTimer) quantile(q float64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := make([]float64, len(t.turns))
	for i, d := range t.turns {
		ns[i] = float64(d.Nanoseconds())
	}
	return quantile(ns, q)
}

// quantile is the nearest-rank q-quantile of xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDurableTurn runs the loop benchmark's workload (internal/benchloop:
// the in-process scripted model without latency, one no-op tool call per
// turn) as an in-memory agent.Runner run and as a durable run (Start + Wait)
// in each iteration, so load that comes and goes hits both alike. It reports
// each one's per-turn p50 and p99 and the differences: the durable
// overhead per turn. Run with -benchtime=200x or more for a stable p99
// (9 timed turns per run).
//
// The variant sqlite-no-autocheckpoint is the same with SQLite's automatic
// WAL checkpoint deferred (wal_autocheckpoint raised on every connection of
// the pool), to show what the checkpoint costs the turn it lands in; it
// also reports the WAL written per run (wal-KiB/run), which the default
// checkpoints every 1000 pages.
func BenchmarkDurableTurn(b *testing.B) {
	for _, variant := range []string{"sqlite", "sqlite-no-autocheckpoint", "postgres"} {
		dialect, noCheckpoint := variant, false
		if variant == "sqlite-no-autocheckpoint" {
			dialect, noCheckpoint = "sqlite", true
		}
		b.Run(variant, func(b *testing.B) {
			ctx := context.Background()
			scen, err := fake.ParseScenario([]byte(benchloop.Scenario(benchTurns)), "bench-loop.yaml")
			if err != nil {
				b.Fatal(err)
			}
			model := fake.NewModel(scen, fake.WithoutLatency())
			tools := func() (*tool.Set, error) { return tool.NewSet(benchloop.Noop{}) }
			url := benchDB(b, dialect)
			st, err := store.Open(ctx, url, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if noCheckpoint {
				deferCheckpoints(b, st.DB())
			}
			var mem, dur turnTimer
			pgURL := ""
			if dialect == "postgres" {
				pgURL = url
			}
			eng, err := durable.Open(ctx, durable.Options{
				Store: st, URL: pgURL,
				Models:  func(string) (llm.Model, string, error) { return model, "fake", nil },
				Tools:   func(durable.Spec) (*tool.Set, error) { return tools() },
				OnEvent: dur.event,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close(5 * time.Second)
			spec := durable.Spec{System: "bench", Model: "fake", Workspace: b.TempDir(), MaxTurns: 100, MaxDepth: -1}

			memRun := func() error {
				ts, err := tools()
				if err != nil {
					return err
				}
				mem.newRun()
				r := agent.Runner{MaxDepth: -1, OnEvent: mem.event}
				out, err := r.Run(ctx, agent.Task{Task: "bench", System: "bench", Model: model, ModelName: "fake",
					ModelSpec: "fake", Tools: ts, Limits: loop.Limits{MaxTurns: 100}})
				if err != nil {
					return err
				}
				if out.Result.Turns != benchTurns || out.Result.StopReason != loop.StopCompleted {
					return fmt.Errorf("in-memory run: %d turns, stop %s", out.Result.Turns, out.Result.StopReason)
				}
				return nil
			}
			durRun := func() error {
				dur.newRun()
				id, err := eng.Start(ctx, "bench", spec)
				if err != nil {
					return err
				}
				in, err := eng.Wait(ctx, id)
				if err != nil {
					return err
				}
				if in.State != instance.Completed || in.Turns != benchTurns {
					return fmt.Errorf("durable run %s: %s after %d turns (%s)", id, in.State, in.Turns, in.Error)
				}
				return nil
			}
			// Warm up: connections, the statement caches, the schema memo.
			for range 3 {
				if err := memRun(); err != nil {
					b.Fatal(err)
				}
				if err := durRun(); err != nil {
					b.Fatal(err)
				}
			}
			mem.reset()
			dur.reset()

			wal0 := walSize(url)
			var memWall, durWall, memCPU, durCPU time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), processCPU()
				if err := memRun(); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), processCPU()
				if err := durRun(); err != nil {
					b.Fatal(err)
				}
				t2, c2 := time.Now(), processCPU()
				memWall, durWall = memWall+t1.Sub(t0), durWall+t2.Sub(t1)
				memCPU, durCPU = memCPU+c1-c0, durCPU+c2-c1
			}
			mp50, mp99 := mem.quantile(0.50), mem.quantile(0.99)
			dp50, dp99 := dur.quantile(0.50), dur.quantile(0.99)
			b.ReportMetric(mp50, "mem-p50-ns/turn")
			b.ReportMetric(mp99, "mem-p99-ns/turn")
			b.ReportMetric(dp50, "p50-ns/turn")
			b.ReportMetric(dp99, "p99-ns/turn")
			b.ReportMetric(dur.mean(), "mean-ns/turn")
			b.ReportMetric(mem.mean(), "mem-mean-ns/turn")
			b.ReportMetric(dp50-mp50, "overhead-p50-ns/turn")
			b.ReportMetric(dp99-mp99, "overhead-p99-ns/turn")
			for _, p := range []string{"generate", "append-call", "tool", "append-result"} {
				b.ReportMetric(dur.phase(p, 0.5), p+"-p50-ns")
				b.ReportMetric(dur.phase(p, 0.99), p+"-p99-ns")
			}
			n := float64(b.N)
			if noCheckpoint {
				b.ReportMetric(float64(walSize(url)-wal0)/1024/n, "wal-KiB/run")
			}
			b.ReportMetric(float64(memWall.Nanoseconds())/n, "mem-ns/run")
			b.ReportMetric(float64(durWall.Nanoseconds())/n, "ns/run")
			b.ReportMetric(float64(memCPU.Nanoseconds())/n, "mem-cpu-ns/run")
			b.ReportMetric(float64(durCPU.Nanoseconds())/n, "cpu-ns/run")
		})
	}
}

// deferCheckpoints raises SQLite's wal_autocheckpoint (a setting of each
// connection) on every connection of the pool, all held at once so each
// is a different one; they stay in the pool, whose idle limit is its size.
func deferCheckpoints(b *testing.B, db *sql.DB) {
	ctx := context.Background()
	var conns []*sql.Conn
	for range db.Stats().MaxOpenConnections {
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 1000000"); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}

// walSize is the size of a SQLite database's write-ahead log (0 for
// Postgres).
func walSize(url string) int64 {
	fi, err := os.Stat(url + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// BenchmarkTurnParts times alone what a durable turn is made of: a DBOS
// step that does nothing (a turn has two: the model call and the tool call)
// and the append of one message to a transcript (a turn has two: the
// assistant's message and the tool result), on the same kind of database.
// One iteration is 50 steps in one workflow, then 50 appends.
func BenchmarkTurnParts(b *testing.B) {
	const perIter = 50
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			ctx := context.Background()
			url := benchDB(b, dialect)
			st, err := store.Open(ctx, url, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			cfg := dbos.Config{AppName: "deputy-bench", ApplicationVersion: "bench", ExecutorID: "bench",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if dialect == "sqlite" {
				cfg.SQLiteSystemDB = st.DB() // as durable.Open does
			} else {
				cfg.DatabaseURL = url
			}
			dctx, err := dbos.NewContext(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer dbos.Shutdown(dctx, 5*time.Second)
			var steps []float64
			wf := func(ctx dbos.Context, n int) (int, error) {
				for i := range n {
					t0 := time.Now()
					if _, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil },
						dbos.WithStepName(fmt.Sprintf("step-%d", i)), dbos.WithStepMaxRetries(0)); err != nil {
						return i, err
					}
					steps = append(steps, float64(time.Since(t0).Nanoseconds()))
				}
				return n, nil
			}
			dbos.RegisterWorkflow(dctx, wf, dbos.WithWorkflowName("bench.steps"))
			if err := dbos.Launch(dctx); err != nil {
				b.Fatal(err)
			}
			if err := st.CreateInstance(ctx, &instance.Record{ID: "bench", Type: "root"}); err != nil {
				b.Fatal(err)
			}
			if err := st.Transition(ctx, "bench", instance.Running, "bench"); err != nil {
				b.Fatal(err)
			}
			msg := llm.Message{Role: llm.Assistant, Content: []llm.Block{
				llm.ToolUse("toolu_1", "noop", json.RawMessage(`{"path":"internal/server/handler.go"}`))}}
			var appends []float64
			seq := 0
			for b.Loop() {
				h, err := dbos.RunWorkflow(dctx, wf, perIter)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.GetResult(); err != nil {
					b.Fatal(err)
				}
				for range perIter {
					t0 := time.Now()
					if err := st.AppendMessages(ctx, "bench", seq, seq, []llm.Message{msg}); err != nil {
						b.Fatal(err)
					}
					appends = append(appends, float64(time.Since(t0).Nanoseconds()))
					seq++
				}
			}
			b.ReportMetric(quantile(steps, 0.5), "step-p50-ns")
			b.ReportMetric(quantile(steps, 0.99), "step-p99-ns")
			b.ReportMetric(quantile(appends, 0.5), "append-p50-ns")
			b.ReportMetric(quantile(appends, 0.99), "append-p99-ns")
		})
	}
}

// buildDeputy builds the deputy binary, pure Go, for the crash tests and
// the benchmarks that run it.
func buildDeputy(b testing.TB) string {
	bin := filepath.Join(b.TempDir(), "deputy")
	build := exec.Command("go", "build", "-o", bin, "../cmd/deputy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build deputy: %v\n%s", err, out)
	}
	return bin
}

// stamped is a fake-server Responder that notes when each request arrived.
type stamped struct {
	fake.Responder
	arrived chan arrival
}

type arrival struct {
	n  int
	at time.Time
}

func (s *stamped) Respond(req *llm.Request, info fake.RequestInfo) fake.Reply {
	s.arrived <- arrival{info.N, time.Now()}
	return s.Responder.Respond(req, info)
}

// fakeServer serves scenario over HTTP and reports each request's arrival.
func fakeServer(b *testing.B, scenario string) (url string, arrived <-chan arrival) {
	s, err := fake.ParseScenario([]byte(scenario), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r := &stamped{Responder: s, arrived: make(chan arrival, 1000)}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: r}))
	b.Cleanup(hs.Close)
	return hs.URL, r.arrived
}

// await returns the arrival of request n, or fails after a minute.
func await(b *testing.B, arrived <-chan arrival, n int) time.Time {
	b.Helper()
	limit := time.NewTimer(time.Minute)
	defer limit.Stop()
	for {
		select {
		case a := <-arrived:
			if a.n == n {
				return a.at
			}
			if a.n > n {
				b.Fatalf("request %d arrived before request %d", a.n, n)
			}
		case <-limit.C:
			b.Fatalf("request %d did not arrive within a minute", n)
		}
	}
}

// recoveryScenario is killTurn+1 turns of one glob call (read-only, so one
// step per call), then an answer.
func recoveryScenario(killTurn int) string {
	return fmt.Sprintf(`
rules:
  - match: {turn: "1-%d"}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {turn: %d}
    text: done
`, killTurn+1, killTurn+2)
}

// childRecoveryScenario is a root that spawns one explorer, which makes
// killTurn+1 turns of one glob call, then answers.
func childRecoveryScenario(killTurn int) string {
	return fmt.Sprintf(`
rules:
  - match: {system: "read-only explorer", turn: "1-%d"}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {system: "read-only explorer"}
    text: found
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "look"}}]
  - match: {turn: 2}
    text: done
`, killTurn+1)
}

// BenchmarkRecovery kills a real `deputy run` with SIGKILL right after the
// checkpoint of turn K's tool call (DEPUTY_FAILPOINT), so the next step is
// turn K+1's model call, and measures how long a new process takes to make
// that call: the fake server's arrival of request K+1.
//
//   - worker: `deputy worker` started right after the kill; from-start-ns is
//     from just before its exec, from-kill-ns from the moment the killed
//     process was reaped (the test starts the worker at once after).
//   - child: a worker again, the kill in a child's turn K instead (the
//     child's workflow resumes once its parent's replay hands it its work).
//   - inprocess: the same recovery inside this process, timed in parts:
//     store.Open (migrations checked), durable.Open (DBOS's own migrations,
//     launch, recovery re-enqueued), then the replay of the checkpointed
//     steps until the request. exec-ns is `deputy version`'s whole run: a
//     process start.
func BenchmarkRecovery(b *testing.B) {
	bin := buildDeputy(b)
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, killTurn := range []int{2, 20} {
			for _, how := range []string{"worker", "inprocess", "child"} {
				b.Run(fmt.Sprintf("%s/turn-%d/%s", dialect, killTurn, how), func(b *testing.B) {
					benchRecovery(b, bin, dialect, killTurn, how)
				})
			}
		}
	}
}

func benchRecovery(b *testing.B, bin, dialect string, killTurn int, how string) {
	ctx := context.Background()
	inProcess := how == "inprocess"
	// The killed run's last request is `last`; the resumed run's first is
	// last+1. A child's requests follow its parent's first.
	scenario, failpoint, last, rootTurns := recoveryScenario(killTurn), fmt.Sprintf("after:turn-%d/call-1-glob", killTurn), killTurn, killTurn+2
	if how == "child" {
		scenario, failpoint, last, rootTurns = childRecoveryScenario(killTurn), fmt.Sprintf("after:child:turn-%d/call-1-glob", killTurn), killTurn+1, 2
	}
	var fromStart, fromKill, storeOpen, engOpen, replay, execs []float64
	for b.Loop() {
		llmURL, arrived := fakeServer(b, scenario)
		ws := b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		dbURL := benchDB(b, dialect)
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.TempDir(), "DEPUTY_DB=" + dbURL,
			"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + llmURL}
		run := exec.Command(bin, "run", "-q", "--model", "anthropic:fake", "--workspace", ws, "recover me")
		run.Dir, run.Env = ws, append(slices.Clone(env), "DEPUTY_FAILPOINT="+failpoint)
		out, err := run.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			b.Fatalf("deputy run was not killed at its failpoint: %v\n%s", err, out)
		}
		killed := time.Now()
		await(b, arrived, last) // the killed run's last request, already in the channel

		if !inProcess {
			w := exec.Command(bin, "worker", "-q", "--until-idle", "--workspace", ws)
			w.Dir, w.Env = ws, env
			var wout bytes.Buffer
			w.Stdout, w.Stderr = &wout, &wout
			t0 := time.Now()
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			at := await(b, arrived, last+1)
			if err := w.Wait(); err != nil {
				b.Fatalf("deputy worker: %v\n%s", err, wout.String())
			}
			fromStart = append(fromStart, float64(at.Sub(t0).Nanoseconds()))
			fromKill = append(fromKill, float64(at.Sub(killed).Nanoseconds()))
		} else {
			t0 := time.Now()
			st, err := store.Open(ctx, dbURL, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			pgURL := ""
			if dialect == "postgres" {
				pgURL = dbURL
			}
			m, err := provider.New("anthropic:fake", provider.Options{Getenv: func(k string) (string, bool) {
				switch k {
				case "ANTHROPIC_API_KEY":
					return "test-key", true
				case "ANTHROPIC_BASE_URL":
					return llmURL, true
				}
				return "", false
			}})
			if err != nil {
				b.Fatal(err)
			}
			opts := durable.Options{Store: st, URL: pgURL,
				Models: func(string) (llm.Model, string, error) { return m, "fake", nil },
				Tools: func(s durable.Spec) (*tool.Set, error) {
					ts, err := builtin.Tools(builtin.Config{Workspace: s.Workspace})
					if err != nil {
						return nil, err
					}
					return tool.NewSet(ts...)
				}}
			if ws, err := st.Workers(ctx); err == nil && len(ws) == 1 {
				// On Postgres the killed `deputy run` was a worker of a
				// fleet: this engine recovers its runs as that worker, as a
				// restarted process on this machine would (taking over
				// its dead predecessor's lease at once).
				opts.ExecutorID, opts.Lease = ws[0].ID, durable.DefaultLease
			}
			eng, err := durable.Open(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			at := await(b, arrived, last+1)
			roots, err := st.ListInstances(ctx, store.Filter{OnlyRoots: true})
			if err != nil || len(roots) != 1 {
				b.Fatalf("roots %v %v", roots, err)
			}
			if _, err := eng.Wait(ctx, roots[0].ID); err != nil {
				b.Fatal(err)
			}
			eng.Close(5 * time.Second)
			st.Close()
			fromStart = append(fromStart, float64(at.Sub(t0).Nanoseconds()))
			fromKill = append(fromKill, float64(at.Sub(killed).Nanoseconds()))
			storeOpen = append(storeOpen, float64(t1.Sub(t0).Nanoseconds()))
			engOpen = append(engOpen, float64(t2.Sub(t1).Nanoseconds()))
			replay = append(replay, float64(at.Sub(t2).Nanoseconds()))
			e0 := time.Now()
			if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
				b.Fatalf("deputy version: %v\n%s", err, out)
			}
			execs = append(execs, float64(time.Since(e0).Nanoseconds()))
		}
		checkRecovered(b, ctx, dbURL, rootTurns)
	}
	b.ReportMetric(quantile(fromStart, 0.5), "from-start-ns")
	b.ReportMetric(quantile(fromStart, 1), "max-from-start-ns")
	b.ReportMetric(quantile(fromKill, 0.5), "from-kill-ns")
	if inProcess {
		b.ReportMetric(quantile(storeOpen, 0.5), "store-open-ns")
		b.ReportMetric(quantile(engOpen, 0.5), "engine-open-ns")
		b.ReportMetric(quantile(replay, 0.5), "replay-ns")
		b.ReportMetric(quantile(execs, 0.5), "exec-ns")
	}
}

// checkRecovered checks the resumed run completed with every turn.
func checkRecovered(b *testing.B, ctx context.Context, dbURL string, turns int) {
	st, err := store.Open(ctx, dbURL, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	roots, err := st.ListInstances(ctx, store.Filter{OnlyRoots: true})
	if err != nil || len(roots) != 1 {
		b.Fatalf("roots %v %v", roots, err)
	}
	if in := roots[0]; in.State != instance.Completed || in.Turns != turns {
		b.Fatalf("recovered root %s: %s after %d turns, want completed after %d (%s)", in.ID, in.State, in.Turns, turns, in.Error)
	}
}

// BenchmarkPausedInstances measures an idle `deputy worker` on a SQLite
// database holding n paused root instances (each created, run and paused
// through store.Transition, with a two-message transcript), n = 0 and
// 10,000: its resident memory (VmRSS, and the peak VmHWM) from /proc, and
// its goroutines, counted in the stack dump SIGQUIT makes it print. The
// worker is known to be up and idle once it has run a detached one-turn
// instance queued before it started.
func BenchmarkPausedInstances(b *testing.B) {
	bin := buildDeputy(b)
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("paused-%d", n), func(b *testing.B) {
			var rss, hwm, gs []float64
			for b.Loop() {
				r, h, g := idleWorker(b, bin, n)
				rss, hwm, gs = append(rss, r), append(hwm, h), append(gs, g)
			}
			b.ReportMetric(quantile(rss, 0.5)/(1<<20), "rss-MiB")
			b.ReportMetric(quantile(hwm, 0.5)/(1<<20), "peak-rss-MiB")
			b.ReportMetric(quantile(gs, 0.5), "goroutines")
		})
	}
}

func idleWorker(b *testing.B, bin string, paused int) (rss, hwm, goroutines float64) {
	ctx := context.Background()
	dbPath := filepath.Join(b.TempDir(), "deputy.db")
	st, err := store.Open(ctx, dbPath, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	def, _ := json.Marshal(durable.Spec{System: "paused", Model: "anthropic:fake", Workspace: "/nowhere", MaxTurns: 30})
	for i := range paused {
		id := fmt.Sprintf("i-paused-%05d", i)
		in := &instance.Record{ID: id, Type: "root", Definition: def, Task: "wait for me", Model: "anthropic:fake"}
		if err := st.CreateInstance(ctx, in); err != nil {
			b.Fatal(err)
		}
		if err := st.SetWorkflow(ctx, id, "deputy-"+id); err != nil {
			b.Fatal(err)
		}
		if err := st.Transition(ctx, id, instance.Running, "run started"); err != nil {
			b.Fatal(err)
		}
		msgs := []llm.Message{llm.UserText("wait for me"), {Role: llm.Assistant, Content: []llm.Block{llm.Text("Waiting for an answer.")}}}
		if err := st.AppendMessages(ctx, id, 1, 0, msgs); err != nil {
			b.Fatal(err)
		}
		if err := st.Transition(ctx, id, instance.Paused, "paused by request"); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()

	llmURL, arrived := fakeServer(b, "rules:\n  - match: {turn: 1}\n    text: pong\n")
	ws := b.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.TempDir(), "DEPUTY_DB=" + dbPath,
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + llmURL, "GOTRACEBACK=all"}
	detach := exec.Command(bin, "run", "-q", "--detach", "--model", "anthropic:fake", "--workspace", ws, "ping")
	detach.Dir, detach.Env = ws, env
	out, err := detach.Output()
	if err != nil {
		b.Fatalf("deputy run --detach: %v\n%s", err, out)
	}
	ping := strings.TrimSpace(string(out))
	select {
	case a := <-arrived:
		b.Fatalf("request %d: the detaching process ran the instance itself", a.n)
	default:
	}

	w := exec.Command(bin, "worker", "-q", "--workspace", ws)
	w.Dir, w.Env = ws, env
	var dump bytes.Buffer
	w.Stdout, w.Stderr = &dump, &dump
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if w.ProcessState == nil {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	}()
	await(b, arrived, 1)
	// The run records its end just after its request: wait for it, then
	// sample the idle worker for a second.
	st, err = store.Open(ctx, dbPath, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	waitUntil(b, st.EventsWritten, "the ping's end", func() bool {
		in, err := st.GetInstance(ctx, ping)
		if err != nil {
			b.Fatalf("ping %q: %v", ping, err)
		}
		if in.State.Terminal() && in.State != instance.Completed {
			b.Fatalf("ping ended %s: %s", in.State, in.Error)
		}
		return in.State.Terminal()
	})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range 20 { // 1 s of samples
		<-tick.C
		r, h := procMemory(b, w.Process.Pid)
		rss, hwm = max(rss, r), max(hwm, h)
	}
	if err := w.Process.Signal(syscall.SIGQUIT); err != nil {
		b.Fatal(err)
	}
	_ = w.Wait() // exit status 2 after the dump
	goroutines = float64(len(goroutineHeader.FindAllIndex(dump.Bytes(), -1)))
	if goroutines == 0 {
		b.Fatalf("no goroutine dump from the worker:\n%s", dump.String())
	}
	left, err := st.ListInstances(ctx, store.Filter{States: []instance.State{instance.Paused}})
	if err != nil || len(left) != paused {
		b.Fatalf("%d paused instances left of %d: %v", len(left), paused, err)
	}
	return rss, hwm, goroutines
}

// goroutineHeader starts each goroutine of a SIGQUIT dump; goroutine 0
// (the signal's own context) is not one. The count includes the runtime's
// own (GC workers, finalizer and the like), the same with 0 or 10,000
// instances.
var goroutineHeader = regexp.MustCompile(`(?m)^goroutine [1-9]\d* `)

// procMemory reads a process's VmRSS and VmHWM, in bytes.
func procMemory(b *testing.B, pid int) (rss, hwm float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			b.Fatalf("%s: %v", sc.Text(), err)
		}
		if k == "VmRSS" {
			rss = kb * 1024
		} else {
			hwm = kb * 1024
		}
	}
	return rss, hwm
}
