package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/benchsub"
)

// `deputy-bench subagents`: the macro benchmarks of issue 4 (context
// economy, fork cache reuse, fan-out), each figure one JSON line with its
// goal. The workloads live in internal/benchsub, where a quick test runs
// them at small sizes.

// subFigures are the figures subagents can run.
var subFigures = []string{"economy", "fork", "fanout"}

func newSubagentsCmd(repeats *int) *cobra.Command {
	var only string
	d := benchsub.DefaultFanOut
	fan := benchsub.FanOutConfig{}
	cmd := &cobra.Command{
		Use:   "subagents [--figures economy,fork,fanout] [--wires anthropic,openai] [--repeats R]",
		Short: "Issue 4's figures: context economy, fork cache reuse, fan-out, against an in-process fake server",
		Long: `Runs issue 4's benchmarks (context economy, fork cache reuse, fan-out) with a
real agent.Runner through the real providers, against a fake server in this
process on loopback, and prints one JSON object per figure with its goal.`,
		Args: cobra.NoArgs,
	}
	wires := addWiresFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		figures, err := parseChoices("--figures", only, subFigures)
		if err != nil {
			return err
		}
		ws, err := parseChoices("--wires", *wires, benchsub.Wires)
		if err != nil {
			return err
		}
		if fan.Children < 1 || fan.Turns < 2 || fan.MaxParallel < 1 || fan.Latency <= 0 {
			return usageErr("--fanout-children and --fanout-parallel must be at least 1, --fanout-turns at least 2, --fanout-latency positive")
		}
		return failed(runBenchSubagents(cmd.Context(), cmd.OutOrStdout(), figures, ws, fan, *repeats))
	}
	f := cmd.Flags()
	f.StringVar(&only, "figures", "economy,fork,fanout", "comma-separated: economy, fork, fanout")
	f.IntVar(&fan.Children, "fanout-children", d.Children, "children of the fan-out")
	f.IntVar(&fan.Turns, "fanout-turns", d.Turns, "model calls per fan-out child")
	f.IntVar(&fan.MaxParallel, "fanout-parallel", d.MaxParallel, "max_parallel of the fan-out")
	f.DurationVar(&fan.Latency, "fanout-latency", d.Latency, "first-byte latency of every fan-out response (real clock)")
	return cmd
}

func runBenchSubagents(ctx context.Context, out io.Writer, figures, wires []string, fan benchsub.FanOutConfig, repeats int) error {
	emit := figureWriter(out)
	for _, f := range figures {
		for _, w := range wires {
			var err error
			switch f {
			case "economy":
				err = benchEconomy(ctx, w, repeats, emit)
			case "fork":
				err = benchFork(ctx, w, repeats, emit)
			case "fanout":
				err = benchFanOut(ctx, w, fan, repeats, emit)
			}
			if err != nil {
				return fmt.Errorf("subagents %s on %s: %w", f, w, err)
			}
		}
	}
	return nil
}

func benchEconomy(ctx context.Context, wire string, repeats int, emit func(figure) error) error {
	var into, rat []float64
	var last *benchsub.EconomyResult
	for range repeats {
		r, err := benchsub.Economy(ctx, wire, benchsub.DefaultEconomy)
		if err != nil {
			return err
		}
		into, rat, last = append(into, float64(r.MaxIntoParent)), append(rat, r.Ratio), r
	}
	m, lo, hi := stats(into)
	if err := emit(figure{Benchmark: "economy", Figure: "tokens_into_parent_per_child", Wire: wire, Value: m, Unit: "tokens",
		Goal: "<= 1000", Met: m <= 1000, Repeats: repeats, Min: lo, Max: hi, Detail: last}); err != nil {
		return err
	}
	m, lo, hi = stats(rat)
	return emit(figure{Benchmark: "economy", Figure: "child_over_parent_tokens", Wire: wire, Value: m, Unit: "x",
		Goal: ">= 30", Met: m >= 30, Repeats: repeats, Min: lo, Max: hi})
}

func benchFork(ctx context.Context, wire string, repeats int, emit func(figure) error) error {
	var prefix, cache []float64
	var last *benchsub.ForkResult
	for range repeats {
		r, err := benchsub.ForkReuse(ctx, wire, benchsub.DefaultFork)
		if err != nil {
			return err
		}
		prefix, cache, last = append(prefix, r.MinPrefixShare), append(cache, r.MinCacheShare), r
	}
	m, lo, hi := stats(prefix)
	if err := emit(figure{Benchmark: "fork", Figure: "min_prefix_share", Wire: wire, Value: m, Unit: "share",
		Goal: ">= 0.95 for every fork child after the first response", Met: m >= 0.95, Repeats: repeats, Min: lo, Max: hi,
		Detail: last}); err != nil {
		return err
	}
	m, lo, hi = stats(cache)
	return emit(figure{Benchmark: "fork", Figure: "min_cache_read_share", Wire: wire, Value: m, Unit: "share",
		Goal: ">= 0.95 for every fork child after the first response", Met: m >= 0.95, Repeats: repeats, Min: lo, Max: hi})
}

// fanDetail is the fan-out figures' detail: each way's medians.
type fanDetail struct {
	Config benchsub.FanOutConfig   `json:"config"`
	Vias   map[string]fanViaDetail `json:"vias"`
}

type fanViaDetail struct {
	viaMedians
	// Deputy only, medians: the root's turns and the children's phase,
	// whose ideal is the loops' (ChildrenRatio is comparable to theirs).
	RootFirstMS   float64 `json:"root_first_turn_ms,omitempty"`
	ChildrenMS    float64 `json:"children_phase_ms,omitempty"`
	ChildrenRatio float64 `json:"children_phase_over_ideal,omitempty"`
	RootSecondMS  float64 `json:"root_second_turn_ms,omitempty"`
}

func benchFanOut(ctx context.Context, wire string, c benchsub.FanOutConfig, repeats int, emit func(figure) error) error {
	// A small untimed round first, so that no way pays for the process's
	// first connections and code paths alone.
	warm := benchsub.FanOutConfig{Children: 2 * c.MaxParallel, Turns: 2, MaxParallel: c.MaxParallel, Latency: time.Millisecond}
	for _, via := range benchsub.FanOutVias {
		if _, err := benchsub.FanOut(ctx, wire, via, warm); err != nil {
			return err
		}
	}
	runs := map[string]*viaSeries{}
	// The ways take turns within each repeat, so load that comes and goes
	// hits them alike.
	for range repeats {
		for _, via := range benchsub.FanOutVias {
			c0 := cpuTime()
			r, err := benchsub.FanOut(ctx, wire, via, c)
			if err != nil {
				return err
			}
			cpu := cpuTime() - c0
			s := runs[via]
			if s == nil {
				s = &viaSeries{}
				runs[via] = s
			}
			s.add(&r.Timing, cpu)
		}
	}
	d := fanDetail{Config: c, Vias: map[string]fanViaDetail{}}
	loopsIdeal := ms(c.Ideal(benchsub.ViaBareSDK))
	for _, via := range benchsub.FanOutVias {
		s := runs[via]
		v := fanViaDetail{viaMedians: s.medians(c.Ideal(via))}
		if via == benchsub.ViaDeputy {
			v.RootFirstMS, v.ChildrenMS, v.RootSecondMS = s.phases()
			v.ChildrenRatio = v.ChildrenMS / loopsIdeal
		}
		d.Vias[via] = v
	}
	dep, bare := d.Vias[benchsub.ViaDeputy], d.Vias[benchsub.ViaBareSDK]
	if err := emit(figure{Benchmark: "fanout", Figure: "wall_over_ideal", Wire: wire, Value: dep.Ratio, Unit: "x",
		Goal: "<= 1.05", Met: dep.Ratio <= 1.05, Repeats: repeats, Min: dep.MinR, Max: dep.MaxR, Detail: d}); err != nil {
		return err
	}
	// Each way over its own ideal: deputy's includes the root's two turns,
	// which the bare loops do not have.
	v := dep.Ratio / bare.Ratio
	return emit(figure{Benchmark: "fanout", Figure: "deputy_vs_bare_sdk_wall_over_ideal", Wire: wire, Value: v, Unit: "x",
		Goal: fmt.Sprintf("<= 1 (deputy %.3f, bare SDK %.3f)", dep.Ratio, bare.Ratio), Met: v <= 1, Repeats: repeats,
		Min: v, Max: v})
}
