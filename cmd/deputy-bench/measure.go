package main

import (
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
