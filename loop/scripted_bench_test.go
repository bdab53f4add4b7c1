package loop_test

import (
	"context"
	"testing"

	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm/fake"
)

// BenchmarkScriptedTurn is the headline figure: the loop's cost per
// turn with deputy's in-process scripted model (scenario matching, usage
// estimation and reply building included) and one tool call per turn.
func BenchmarkScriptedTurn(b *testing.B) {
	const turns = 10
	s, err := fake.ParseScenario([]byte(benchloop.Scenario(turns)), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg := benchloop.Config(fake.NewModel(s, fake.WithoutLatency()))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := benchloop.Run(ctx, cfg, turns); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turns), "ns/turn")
	b.ReportMetric(testing.AllocsPerRun(1, func() { _ = benchloop.Run(ctx, cfg, turns) })/turns, "allocs/turn")
}
