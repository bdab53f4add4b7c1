package main

import (
	"math"
	"testing"
	"time"

	"github.com/deputy-run/deputy/internal/benchsub"
)

// TestSQLiteBound checks the bound's formula on a fan-out of 4 tasks of 3
// steps each, 2 at a time: two waves, each the longer of its turns'
// latency plus one task's steps, and its tasks' steps one after another.
func TestSQLiteBound(t *testing.T) {
	t.Parallel()
	c := benchsub.OrchConfig{Levels: []int{4}, Turns: 3, MaxParallel: 2, Latency: 100 * time.Millisecond} // ideal 800 ms
	for _, tc := range []struct {
		name            string
		costMS, boundMS float64
	}{
		// A wave: max(3 × 100 + 3 × 1, 2 × 3 × 1) = 303; 2 × 100 + 2 × 303.
		{"latency bound", 1, 806},
		// A wave: max(3 × 100 + 3 × 200, 2 × 3 × 200) = 1200; 200 + 2 × 1200.
		{"store bound", 200, 2600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newSQLiteBound(c, tc.costMS, 12)
			if math.Abs(b.BoundMS-tc.boundMS) > 1e-9 || math.Abs(b.Ratio-tc.boundMS/800) > 1e-9 || b.StepCostMS != tc.costMS {
				t.Fatalf("bound %+v, want %v ms", b, tc.boundMS)
			}
		})
	}
}
