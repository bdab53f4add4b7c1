package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
)

// benchFigure is one line of `deputy bench` output.
type benchFigure struct {
	Scenario      string  `json:"scenario"`
	Via           string  `json:"via"`
	Runs          int     `json:"runs"`
	TurnsPerRun   int     `json:"turns_per_run"`
	Repeats       int     `json:"repeats"`
	NsPerTurn     float64 `json:"ns_per_turn"`     // wall time, median of repeats
	CPUNsPerTurn  float64 `json:"cpu_ns_per_turn"` // this process's user+system CPU, median
	AllocsPerTurn float64 `json:"allocs_per_turn"` // heap allocations, median
	BytesPerTurn  float64 `json:"bytes_per_turn"`
}

func newBenchCmd() *cobra.Command {
	var via string
	var runs, turns, repeats int
	var sub *benchSubFlags
	var orch *benchOrchFlags
	cmd := &cobra.Command{
		Use:   "bench loop|subagents|orchestration [--via inprocess,anthropic,openai] [--runs N] [--turns T] [--repeats R]",
		Short: "Measure the agent loop's cost per turn, in process or through the fake API over loopback HTTP",
		Long: `Macro benchmarks. "loop" runs the agent loop on a scripted scenario of one
no-op tool call per turn, either on the in-process scripted model or through
the real Anthropic / OpenAI clients against a "deputy fakellm" child process
on loopback, so the figures are the client side only. Prints one JSON object
per --via value: wall, CPU and allocations per turn, medians of --repeats.
"subagents" runs issue 4's benchmarks (context economy, fork cache reuse,
fan-out) against an in-process fake server and prints one JSON object per
figure with its goal (flags marked "subagents:"). "orchestration" runs issue 7's
(a fan_out of many tasks, a dependency graph; in memory, beside a bare SDK
loop, and durably on SQLite and Postgres) the same way (flags marked
"orchestration:"; --wires as for subagents).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "subagents" { // issue 4's benchmarks: bench_subagents.go
				if repeats < 1 {
					return usageErr("--repeats must be at least 1")
				}
				return runBenchSubagents(cmd.Context(), cmd.OutOrStdout(), sub, repeats)
			}
			if args[0] == "orchestration" { // issue 7's benchmarks: bench_orchestrate.go
				if repeats < 1 {
					return usageErr("--repeats must be at least 1")
				}
				return runBenchOrchestration(cmd.Context(), cmd.OutOrStdout(), sub.wires, orch, repeats)
			}
			if args[0] != "loop" {
				return usageErr("unknown benchmark %q (have: loop, subagents, orchestration)", args[0])
			}
			if runs < 1 || turns < 2 || repeats < 1 {
				return usageErr("--runs and --repeats must be at least 1, --turns at least 2")
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, v := range strings.Split(via, ",") {
				fig, err := benchLoop(cmd.Context(), strings.TrimSpace(v), runs, turns, repeats)
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				if err := enc.Encode(fig); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&via, "via", "inprocess,anthropic,openai", "comma-separated: inprocess, anthropic, openai")
	f.IntVar(&runs, "runs", 200, "loop runs per repeat")
	f.IntVar(&turns, "turns", 10, "turns per run (the last one answers)")
	f.IntVar(&repeats, "repeats", 5, "repeats; figures are medians")
	sub = addBenchSubagentFlags(f)
	orch = addBenchOrchestrationFlags(f)
	return cmd
}

func benchLoop(ctx context.Context, via string, runs, turns, repeats int) (*benchFigure, error) {
	scen := benchloop.Scenario(turns)
	var model llm.Model
	switch via {
	case "inprocess":
		s, err := fake.ParseScenario([]byte(scen), "bench-loop.yaml")
		if err != nil {
			return nil, err
		}
		model = fake.NewModel(s, fake.WithoutLatency())
	case "anthropic", "openai":
		url, stop, err := startBenchServer(ctx, scen)
		if err != nil {
			return nil, err
		}
		defer stop()
		env := map[string]string{"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url,
			"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": url + "/v1"}
		model, err = provider.New(via+":fake", provider.Options{Getenv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		}})
		if err != nil {
			return nil, err
		}
	default:
		return nil, usageErr("unknown --via %q (have: inprocess, anthropic, openai)", via)
	}
	cfg := benchloop.Config(model)
	once := func() error { return benchloop.Run(ctx, cfg, turns) }
	if err := once(); err != nil { // warm up connections and caches
		return nil, err
	}
	var wall, cpu, allocs, bytes []float64
	n := float64(runs * turns)
	for range repeats {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c0, t0 := cpuTime(), time.Now()
		for range runs {
			if err := once(); err != nil {
				return nil, err
			}
		}
		elapsed, c1 := time.Since(t0), cpuTime()
		runtime.ReadMemStats(&m1)
		wall = append(wall, float64(elapsed.Nanoseconds())/n)
		cpu = append(cpu, float64((c1-c0).Nanoseconds())/n)
		allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/n)
		bytes = append(bytes, float64(m1.TotalAlloc-m0.TotalAlloc)/n)
	}
	return &benchFigure{Scenario: "loop", Via: via, Runs: runs, TurnsPerRun: turns, Repeats: repeats,
		NsPerTurn: median(wall), CPUNsPerTurn: median(cpu), AllocsPerTurn: median(allocs), BytesPerTurn: median(bytes)}, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startBenchServer runs `deputy fakellm` as a child process, so the server's
// CPU and allocations are not counted as the client's.
func startBenchServer(ctx context.Context, scenario string) (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "deputy-bench")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(scenario), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	self, err := os.Executable()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, self, "fakellm", "--addr", "127.0.0.1:0", "--scenario", path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	i := strings.Index(line, "http://")
	if err != nil || i < 0 {
		stop()
		return "", nil, fmt.Errorf("fakellm did not start: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return strings.TrimSpace(line[i:]), stop, nil
}
