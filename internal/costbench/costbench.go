// Package costbench measures the engine-cost workload of issue 19: N
// isolated children × T turns with L ms of first-byte latency, a no-op tool
// call on every turn but the last, run against deputy's fake LLM in its own
// process, each configuration's client in its own process too, so client
// CPU is that process's own rusage and nothing else's.
//
// This file holds only the workload (its shape, the fake's script, the
// ideal wall time); the harness is in the test files, so the package links
// nothing into any binary.
package costbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Workload is one N × T @ L shape, at most MaxParallel children at once.
type Workload struct {
	N           int
	Turns       int
	MaxParallel int
	Latency     time.Duration
}

// Configs are the configurations the harness knows, in the order it runs
// them: the bare openai-go loop (plain, streamed), deputy in memory
// (agent.Runner; not streamed, streamed), deputy durable (deputy.Open on
// SQLite, on Postgres).
var Configs = []string{"bare-plain", "bare-stream", "memory", "memory-stream", "sqlite", "postgres"}

// Large is the second workload: 1,000 × 3 @ 200 ms, 200 at once
// (COSTBENCH_PRESET=large).
var Large = Workload{N: 1000, Turns: 3, MaxParallel: 200, Latency: 200 * time.Millisecond}

// Default is the first workload: 100 × 3 @ 100 ms, all at once.
var Default = Workload{N: 100, Turns: 3, MaxParallel: 100, Latency: 100 * time.Millisecond}

// Ideal is the wall time latency alone asks for: each wave of MaxParallel
// children makes Turns calls one after another.
func (w Workload) Ideal() time.Duration {
	waves := (w.N + w.MaxParallel - 1) / w.MaxParallel
	return time.Duration(waves*w.Turns) * w.Latency
}

// Calls is how many model requests the workload makes.
func (w Workload) Calls() int { return w.N * w.Turns }

// Env is the workload as the environment a child process reads it from
// (WorkloadFromEnv's variables).
func (w Workload) Env() []string {
	return []string{
		"COSTBENCH_PRESET=",
		"COSTBENCH_N=" + strconv.Itoa(w.N),
		"COSTBENCH_TURNS=" + strconv.Itoa(w.Turns),
		"COSTBENCH_MAX_PARALLEL=" + strconv.Itoa(w.MaxParallel),
		"COSTBENCH_LATENCY_MS=" + strconv.FormatInt(w.Latency.Milliseconds(), 10),
	}
}

// Scenario is the fake server's script: a noop call on turns 1..Turns-1
// (only when the request offers noop, so a request that lost its tools
// shows as a wrong answer, not as a silent success), then the answer.
func (w Workload) Scenario() string {
	var b strings.Builder
	b.WriteString("name: costbench\nrules:\n")
	if w.Turns > 1 {
		fmt.Fprintf(&b, "  - match: {turn: \"1-%d\", tools: [noop]}\n", w.Turns-1)
		b.WriteString("    tool_calls: [{name: noop, input: {path: \"turn {{.Turn}}\"}}]\n")
	}
	b.WriteString("default:\n  text: \"Done after {{.Turn}} turns.\"\n")
	return b.String()
}

// envInt reads a positive integer (or, with zero, a non-negative one) from
// the environment; a bad value is an error rather than a silent default so
// a typo does not change the figures.
func envInt(name string, def int, zero bool) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n == 0 && !zero {
		want := "a positive integer"
		if zero {
			want = "a non-negative integer"
		}
		return 0, fmt.Errorf("costbench: %s=%q: want %s", name, v, want)
	}
	return n, nil
}

// WorkloadFromEnv reads COSTBENCH_PRESET (empty: Default; "large": Large),
// then COSTBENCH_N, COSTBENCH_TURNS, COSTBENCH_MAX_PARALLEL (default N) and
// COSTBENCH_LATENCY_MS over it.
func WorkloadFromEnv() (Workload, error) {
	base := Default
	switch p := os.Getenv("COSTBENCH_PRESET"); p {
	case "":
	case "large":
		base = Large
	default:
		return Workload{}, fmt.Errorf("costbench: COSTBENCH_PRESET=%q: want large or nothing", p)
	}
	n, err := envInt("COSTBENCH_N", base.N, false)
	if err != nil {
		return Workload{}, err
	}
	t, err := envInt("COSTBENCH_TURNS", base.Turns, false)
	if err != nil {
		return Workload{}, err
	}
	mp := base.MaxParallel
	if os.Getenv("COSTBENCH_N") != "" && os.Getenv("COSTBENCH_PRESET") == "" {
		mp = n // the default workload runs every child at once
	}
	if mp, err = envInt("COSTBENCH_MAX_PARALLEL", mp, false); err != nil {
		return Workload{}, err
	}
	l, err := envInt("COSTBENCH_LATENCY_MS", int(base.Latency.Milliseconds()), true)
	if err != nil {
		return Workload{}, err
	}
	return Workload{N: n, Turns: t, MaxParallel: min(mp, n), Latency: time.Duration(l) * time.Millisecond}, nil
}

// ConfigsFromEnv reads COSTBENCH_CONFIGS, a comma-separated subset of
// Configs (default all of them), and refuses a name it does not know.
func ConfigsFromEnv() ([]string, error) {
	v := os.Getenv("COSTBENCH_CONFIGS")
	if v == "" {
		return Configs, nil
	}
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		ok := false
		for _, k := range Configs {
			ok = ok || k == c
		}
		if !ok {
			return nil, fmt.Errorf("costbench: COSTBENCH_CONFIGS: unknown config %q (have %s)", c, strings.Join(Configs, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}
