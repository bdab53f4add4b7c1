package costbench

import (
	"strings"
	"testing"
	"time"
)

// TestWorkloadFromEnv checks that a bad knob is refused rather than silently
// replaced by the default, which would change the figures unnoticed.
// t.Setenv rules out t.Parallel here.
func TestWorkloadFromEnv(t *testing.T) {
	t.Setenv("COSTBENCH_PRESET", "")
	t.Setenv("COSTBENCH_N", "7")
	t.Setenv("COSTBENCH_TURNS", "")
	t.Setenv("COSTBENCH_MAX_PARALLEL", "")
	t.Setenv("COSTBENCH_LATENCY_MS", "20")
	w, err := WorkloadFromEnv()
	if want := (Workload{N: 7, Turns: 3, MaxParallel: 7, Latency: 20 * time.Millisecond}); err != nil || w != want {
		t.Fatalf("got %+v, %v; want %+v", w, err, want)
	}
	t.Setenv("COSTBENCH_LATENCY_MS", "0")
	if w, err := WorkloadFromEnv(); err != nil || w.Latency != 0 {
		t.Fatalf("latency 0: %+v, %v", w, err)
	}
	t.Setenv("COSTBENCH_TURNS", "-1")
	if _, err := WorkloadFromEnv(); err == nil {
		t.Fatal("COSTBENCH_TURNS=-1 was accepted")
	}
	t.Setenv("COSTBENCH_TURNS", "")
	t.Setenv("COSTBENCH_N", "")
	t.Setenv("COSTBENCH_LATENCY_MS", "")
	t.Setenv("COSTBENCH_PRESET", "large")
	if w, err := WorkloadFromEnv(); err != nil || w != Large || w.Ideal() != 3*time.Second {
		t.Fatalf("large: %+v (ideal %v), %v; want %+v, 3s", w, w.Ideal(), err, Large)
	}
	t.Setenv("COSTBENCH_PRESET", "huge")
	if _, err := WorkloadFromEnv(); err == nil {
		t.Fatal("COSTBENCH_PRESET=huge was accepted")
	}
	t.Setenv("COSTBENCH_CONFIGS", "memory, sqlite")
	if c, err := ConfigsFromEnv(); err != nil || strings.Join(c, ",") != "memory,sqlite" {
		t.Fatalf("configs: %v, %v", c, err)
	}
	t.Setenv("COSTBENCH_CONFIGS", "memory,sqlit")
	if _, err := ConfigsFromEnv(); err == nil || !strings.Contains(err.Error(), `"sqlit"`) {
		t.Fatalf("a misspelt config: %v", err)
	}
}

// The fake's script is the workload's: a noop call on every turn but the
// last; one turn has no tool rule at all.
func TestScenario(t *testing.T) {
	t.Parallel()
	if s := (Workload{Turns: 3}).Scenario(); !strings.Contains(s, `turn: "1-2", tools: [noop]`) {
		t.Errorf("3 turns:\n%s", s)
	}
	if s := (Workload{Turns: 1}).Scenario(); strings.Contains(s, "noop") {
		t.Errorf("1 turn:\n%s", s)
	}
}
