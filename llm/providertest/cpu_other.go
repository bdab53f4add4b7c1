//go:build !unix

package providertest

import "testing"

// MeasureCPU runs the benchmark loop; CPU time is not measured here.
func MeasureCPU(b *testing.B, body func()) {
	b.Helper()
	for b.Loop() {
		body()
	}
}
