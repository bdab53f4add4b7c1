package costbench

import "testing"

// TestWorkloadFromEnv checks that a bad knob is refused rather than silently
// replaced by the default, which would change the figures unnoticed.
// t.Setenv rules out t.Parallel here.
func TestWorkloadFromEnv(t *testing.T) {
	t.Setenv("COSTBENCH_N", "7")
	t.Setenv("COSTBENCH_TURNS", "")
	t.Setenv("COSTBENCH_LATENCY_MS", "20")
	w, err := WorkloadFromEnv()
	if err != nil || w.N != 7 || w.Turns != 3 || w.Latency.Milliseconds() != 20 {
		t.Fatalf("got %+v, %v; want N=7 Turns=3 Latency=20ms", w, err)
	}
	t.Setenv("COSTBENCH_TURNS", "-1")
	if _, err := WorkloadFromEnv(); err == nil {
		t.Fatal("COSTBENCH_TURNS=-1 was accepted")
	}
}
