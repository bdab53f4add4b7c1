//go:build unix

package agent_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// Spawn overhead (issue 4, benchmark c): what one spawn costs on the
// in-process scripted model, with no latency and no wire. Every variant is
// a root run of spawnTurns+1 turns through Runner.Run with the spawn tool
// offered: each of the first spawnTurns turns calls either the no-op tool
// (baseline) or spawn_subagent (a child of one turn that answers text, then
// the relay), and the last turn answers. The cost of one spawn is
// (variant - baseline) / spawnTurns: the spawn tool's decoding and checks,
// the child's setup, its loop run and the relay's tool result, minus a
// no-op tool call. The tree's setup, paid once per Run, is in both and
// cancels out.

const spawnTurns = 25

var spawnBenchScenario = fmt.Sprintf(`
rules:
  - match: {last_user: "forked from this conversation"}
    text: "Conclusion: done in the fork."
  - match: {system: "bench child"}
    text: "Conclusion: done."
  - match: {turn: "1-%[1]d", system: "root, isolated"}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: child, task: "say done", description: "bench"}}]
  - match: {turn: "1-%[1]d", system: "root, fork"}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: forker, task: "say done", description: "bench"}}]
  - match: {turn: "1-%[1]d"}
    tool_calls: [{name: noop, input: {path: internal/server/handler.go}}]
  - match: {turn: %[2]d}
    text: "done"
`, spawnTurns, spawnTurns+1)

// spawnBench is the runner and a run function per variant.
func spawnBench(b *testing.B) map[string]func() error {
	b.Helper()
	s, err := fake.ParseScenario([]byte(spawnBenchScenario), "spawn-bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	// The catalog is built once, as a long-lived runner holds it; the
	// built-ins stay in it so the spawn tool's description has its usual size.
	base, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err := base.With(
		&agentdef.Definition{Name: "child", Description: "answers at once", SystemPrompt: "You are a bench child.", Tools: []string{}},
		&agentdef.Definition{Name: "forker", Description: "answers at once, forked", SystemPrompt: "Answer at once.",
			Tools: []string{}, Mode: agentdef.ModeFork},
	)
	if err != nil {
		b.Fatal(err)
	}
	r := &agent.Runner{Catalog: cat}
	model := fake.NewModel(s, fake.WithoutLatency())
	tools := tool.MustSet(benchloop.Noop{})
	ctx := context.Background()
	runs := map[string]func() error{}
	for _, variant := range []string{"baseline", "isolated", "fork"} {
		task := agent.Task{Task: variant, System: "You are the benchmark's root, " + variant + ".", Model: model, ModelName: "fake",
			Tools: tools, Compaction: loop.Compaction{Threshold: -1}}
		kids := spawnTurns
		if variant == "baseline" {
			kids = 0
		}
		runs[variant] = func() error {
			o, err := r.Run(ctx, task)
			if err != nil {
				return err
			}
			if o.Result.Turns != spawnTurns+1 || len(o.Instances) != 1+kids || o.Result.Answer != "done" {
				return fmt.Errorf("%s: %d turns, %d instances, answer %q", variant, o.Result.Turns, len(o.Instances), o.Result.Answer)
			}
			for _, c := range o.Instances[1:] {
				if c.State != instance.Completed || c.Turns != 1 || c.Report == "" {
					return fmt.Errorf("%s: child %+v", variant, c)
				}
			}
			return nil
		}
	}
	for v, run := range runs { // check the workloads before timing them
		if err := run(); err != nil {
			b.Fatalf("%s: %v", v, err)
		}
	}
	return runs
}

// BenchmarkSpawn times each variant on its own: ns/op and allocs/op are per
// run of spawnTurns+1 turns.
func BenchmarkSpawn(b *testing.B) {
	runs := spawnBench(b)
	for _, v := range []string{"baseline", "isolated", "fork"} {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := runs[v](); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSpawnOverhead pairs each spawning run with a baseline run in the
// same iteration, so load that comes and goes hits both alike, and reports
// the difference per spawn: ns/spawn (wall), cpu-ns/spawn (this process's
// CPU time, which other processes' load moves far less) and allocs/spawn.
func BenchmarkSpawnOverhead(b *testing.B) {
	runs := spawnBench(b)
	for _, v := range []string{"isolated", "fork"} {
		b.Run(v, func(b *testing.B) {
			var spawn, base, spawnCPU, baseCPU time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), processCPU()
				if err := runs[v](); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), processCPU()
				if err := runs["baseline"](); err != nil {
					b.Fatal(err)
				}
				t2, c2 := time.Now(), processCPU()
				spawn, base = spawn+t1.Sub(t0), base+t2.Sub(t1)
				spawnCPU, baseCPU = spawnCPU+c1-c0, baseCPU+c2-c1
			}
			n := float64(b.N * spawnTurns)
			b.ReportMetric(float64((spawn-base).Nanoseconds())/n, "ns/spawn")
			b.ReportMetric(float64((spawnCPU-baseCPU).Nanoseconds())/n, "cpu-ns/spawn")
			a := testing.AllocsPerRun(20, func() { _ = runs[v]() }) - testing.AllocsPerRun(20, func() { _ = runs["baseline"]() })
			b.ReportMetric(a/spawnTurns, "allocs/spawn")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
