//go:build unix

package providertest

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MeasureCPU runs the benchmark loop body and reports the process CPU time
// per iteration as cpu-ns/op. On a shared machine, wall time per op moves
// with other processes' load; CPU time moves far less. It counts the whole
// process: client and the in-process fake server.
func MeasureCPU(b *testing.B, body func()) {
	b.Helper()
	start := processCPU()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(processCPU()-start)/float64(n), "cpu-ns/op")
	}
}
