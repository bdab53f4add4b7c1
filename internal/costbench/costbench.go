// Package costbench measures the engine-cost workload of issue 19: N
// isolated children × T turns with L ms of first-byte latency, run against
// deputy's fake LLM in its own process, each configuration's client in its
// own process too, so client CPU is exactly that process's rusage.
package costbench

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Workload is one N × T @ L shape.
type Workload struct {
	N       int
	Turns   int
	Latency time.Duration
}

// envInt reads a positive integer from the environment; a bad value is an
// error rather than a silent default so a typo does not change the figures.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("costbench: %s=%q: want a positive integer", name, v)
	}
	return n, nil
}

// WorkloadFromEnv reads COSTBENCH_N, COSTBENCH_TURNS, COSTBENCH_LATENCY_MS
// (defaults 100, 3, 100).
func WorkloadFromEnv() (Workload, error) {
	n, err := envInt("COSTBENCH_N", 100)
	if err != nil {
		return Workload{}, err
	}
	t, err := envInt("COSTBENCH_TURNS", 3)
	if err != nil {
		return Workload{}, err
	}
	l, err := envInt("COSTBENCH_LATENCY_MS", 100)
	if err != nil {
		return Workload{}, err
	}
	return Workload{N: n, Turns: t, Latency: time.Duration(l) * time.Millisecond}, nil
}
