package main

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/benchsub"
)

// The helpers every benchmark's figures are made with.

// stats is the median, min and max of xs (not empty).
func stats(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is this process's user and system CPU time so far: the client's
// side of a benchmark, whose servers run elsewhere or are counted in.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// splitList is a comma-separated flag's values, blanks dropped.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// addWiresFlag adds --wires, which subagents and orchestration share.
func addWiresFlag(cmd *cobra.Command) *string {
	return cmd.Flags().String("wires", strings.Join(benchsub.Wires, ","), "comma-separated: "+strings.Join(benchsub.Wires, ", "))
}

// parseChoices is a comma-separated flag's values, each one of have; none
// is an error too, since it would run nothing and print no figure.
func parseChoices(flag, value string, have []string) ([]string, error) {
	vs := splitList(value)
	if len(vs) == 0 {
		return nil, usageErr("%s is empty (have: %s)", flag, strings.Join(have, ", "))
	}
	for _, v := range vs {
		if !slices.Contains(have, v) {
			return nil, usageErr("unknown %s value %q (have: %s)", flag, v, strings.Join(have, ", "))
		}
	}
	return vs, nil
}

// figure is one line of `deputy-bench subagents` or `deputy-bench
// orchestration` output.
type figure struct {
	Benchmark string  `json:"benchmark"` // economy, fork, fanout, orchestration
	Figure    string  `json:"figure"`
	Wire      string  `json:"wire"`
	Via       string  `json:"via,omitempty"` // orchestration's: the way the figure is of
	Value     float64 `json:"value"`         // median over repeats
	Unit      string  `json:"unit"`
	Goal      string  `json:"goal"`
	Met       bool    `json:"met"`
	Repeats   int     `json:"repeats"`
	// Min and Max are over the repeats: equal when the figure is fixed by
	// the scripted workload, a spread when it is a measured time.
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Detail any     `json:"detail,omitempty"`
}

// figureWriter prints figures to out, one JSON line each.
func figureWriter(out io.Writer) func(figure) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false) // goals read "<= 1000", not "\u003c= 1000"
	return func(f figure) error { return enc.Encode(f) }
}

// viaSeries is one way's runs of a fan-out or an orchestration figure.
type viaSeries struct {
	ratio, wall, cpu, first, kids, second []float64
	peak                                  int
}

// add records one run of the way, which took cpu of this process's time.
func (s *viaSeries) add(t *benchsub.Timing, cpu time.Duration) {
	s.ratio, s.wall, s.cpu = append(s.ratio, t.Ratio), append(s.wall, ms(t.Wall)), append(s.cpu, ms(cpu))
	s.first, s.kids, s.second = append(s.first, ms(t.RootFirst)), append(s.kids, ms(t.Children)), append(s.second, ms(t.RootSecond))
	s.peak = max(s.peak, t.PeakRunning)
}

// viaMedians heads a way's detail in a fan-out or orchestration figure.
type viaMedians struct {
	WallMS  float64 `json:"wall_ms_median"`
	IdealMS float64 `json:"ideal_ms"`
	Ratio   float64 `json:"wall_over_ideal_median"`
	MinR    float64 `json:"wall_over_ideal_min"`
	MaxR    float64 `json:"wall_over_ideal_max"`
	// CPUMS is this process's CPU time during a run (the client, the
	// in-process fake server and, for a durable way, the engine and its
	// database), median.
	CPUMS float64 `json:"cpu_ms_median"`
	Peak  int     `json:"peak_running"`
}

// medians are s's figures beside ideal, the way's ideal wall time.
func (s *viaSeries) medians(ideal time.Duration) viaMedians {
	m, lo, hi := stats(s.ratio)
	v := viaMedians{IdealMS: ms(ideal), Ratio: m, MinR: lo, MaxR: hi, Peak: s.peak}
	v.WallMS, _, _ = stats(s.wall)
	v.CPUMS, _, _ = stats(s.cpu)
	return v
}

// phases are the medians of the root's phases (first turn, children, last
// turn), in milliseconds.
func (s *viaSeries) phases() (first, kids, second float64) {
	first, _, _ = stats(s.first)
	kids, _, _ = stats(s.kids)
	second, _, _ = stats(s.second)
	return first, kids, second
}
