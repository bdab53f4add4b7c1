package fake

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ServerFlags are the knobs a scenario sets for the whole server (its
// latency, its faults, its seed) and the server's own, as command-line
// values: deputy fakellm's flags. Apply checks them and sets Options, so a
// test needs no scenario file to make every third request fail.
//
// Faults are written KIND[,key=value...] with the keys a scenario's fault
// has (retry_after, delay, after_bytes), and, for Faults, prefixed with the
// request number they hit: "3=overloaded", "2=rate_limit,retry_after=2s",
// "5=cut_stream,after_bytes=200".
type ServerFlags struct {
	// Latency delays every answer's headers, PerToken each output token
	// (Options.FirstByte, PerToken); a scenario's own latency wins.
	Latency, PerToken time.Duration
	// FaultRate fails this share (0..1) of requests, seeded by Seed, with
	// RandomFault (default server_error).
	FaultRate   float64
	RandomFault string
	// Faults are N=KIND[,key=value...], one per request number.
	Faults []string
	Seed   uint64
	// MaxDelta, MinCacheTokens and MaxLogged are Options' fields; zero
	// keeps their defaults.
	MaxDelta, MinCacheTokens, MaxLogged int
}

// Apply sets o from f, or says which flag is wrong and why.
func (f ServerFlags) Apply(o *Options) error {
	switch {
	case f.Latency < 0:
		return fmt.Errorf("--latency %s: a delay cannot be negative", f.Latency)
	case f.PerToken < 0:
		return fmt.Errorf("--per-token %s: a delay cannot be negative", f.PerToken)
	case math.IsNaN(f.FaultRate) || f.FaultRate < 0 || f.FaultRate > 1:
		return fmt.Errorf("--fault-rate %v: a rate is from 0 to 1 (0.05: one request in twenty)", f.FaultRate)
	case f.MaxDelta < 0 || f.MinCacheTokens < 0:
		return fmt.Errorf("--max-delta and --min-cache-tokens cannot be negative")
	}
	o.FirstByte, o.PerToken, o.FaultRate, o.Seed = f.Latency, f.PerToken, f.FaultRate, f.Seed
	o.MaxDelta, o.MinCacheTokens, o.MaxLogged = f.MaxDelta, f.MinCacheTokens, f.MaxLogged
	if f.RandomFault != "" {
		rf, err := ParseFault(f.RandomFault)
		if err != nil {
			return fmt.Errorf("--random-fault %q: %w", f.RandomFault, err)
		}
		o.RandomFault = rf
	}
	for _, spec := range f.Faults {
		n, fault, err := ParseRequestFault(spec)
		if err != nil {
			return fmt.Errorf("--fault %q: %w", spec, err)
		}
		if _, dup := o.Faults[n]; dup {
			return fmt.Errorf("--fault %q: request %d already has a fault", spec, n)
		}
		if o.Faults == nil {
			o.Faults = map[int]Fault{}
		}
		o.Faults[n] = fault
	}
	return nil
}

// ParseRequestFault reads N=KIND[,key=value...]: the fault request N gets.
func ParseRequestFault(spec string) (int, Fault, error) {
	num, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return 0, Fault{}, fmt.Errorf("want N=KIND (3=overloaded), the request number first")
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 {
		return 0, Fault{}, fmt.Errorf("request number %q: want an integer from 1 (requests are counted from 1)", num)
	}
	f, err := ParseFault(rest)
	return n, f, err
}

// ParseFault reads KIND[,key=value...], a fault as a scenario writes it
// ({kind: rate_limit, retry_after: 2s}) on one line: rate_limit,retry_after=2s.
func ParseFault(spec string) (Fault, error) {
	parts := strings.Split(spec, ",")
	f := Fault{Kind: FaultKind(strings.TrimSpace(parts[0]))}
	if !knownFault(f.Kind) {
		return f, fmt.Errorf("unknown fault %q (one of %s)", f.Kind, faultKindList())
	}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return f, fmt.Errorf("%q: want key=value (retry_after, delay, after_bytes)", kv)
		}
		var err error
		switch k {
		case "retry_after":
			f.RetryAfter, err = flagDuration(k, v)
		case "delay":
			f.Delay, err = flagDuration(k, v)
		case "after_bytes":
			if f.AfterBytes, err = strconv.Atoi(v); err != nil || f.AfterBytes < 0 {
				err = fmt.Errorf("after_bytes %q: want an integer from 0", v)
			}
		default:
			err = fmt.Errorf("unknown key %q (known: retry_after, delay, after_bytes)", k)
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

func knownFault(k FaultKind) bool {
	for _, known := range faultKinds {
		if k == known {
			return true
		}
	}
	return false
}

func flagDuration(key, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration from 0 in Go's syntax (250ms, 2s)", key, v)
	}
	return d, nil
}
