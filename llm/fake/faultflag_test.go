package fake

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestServerFlagsApply(t *testing.T) {
	t.Parallel()
	var o Options
	f := ServerFlags{Latency: 200 * time.Millisecond, PerToken: 3 * time.Millisecond, FaultRate: 0.25, Seed: 7,
		RandomFault: "rate_limit,retry_after=2s", MaxDelta: 4,
		Faults: []string{"3=overloaded", "5=cut_stream,after_bytes=200", "6=slow_first_byte,delay=1.5s"}}
	if err := f.Apply(&o); err != nil {
		t.Fatal(err)
	}
	want := Options{FirstByte: 200 * time.Millisecond, PerToken: 3 * time.Millisecond, FaultRate: 0.25, Seed: 7, MaxDelta: 4,
		RandomFault: Fault{Kind: FaultRateLimit, RetryAfter: 2 * time.Second},
		Faults: map[int]Fault{3: {Kind: FaultOverloaded}, 5: {Kind: FaultCutStream, AfterBytes: 200},
			6: {Kind: FaultSlowFirstByte, Delay: 1500 * time.Millisecond}}}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("Apply:\n got %+v\nwant %+v", o, want)
	}
}

func TestServerFlagsErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    ServerFlags
		want string
	}{
		{ServerFlags{Faults: []string{"3=overload"}}, `--fault "3=overload": unknown fault "overload" (one of rate_limit, overloaded`},
		{ServerFlags{Faults: []string{"overloaded"}}, `--fault "overloaded": want N=KIND (3=overloaded)`},
		{ServerFlags{Faults: []string{"0=overloaded"}}, `request number "0": want an integer from 1`},
		{ServerFlags{Faults: []string{"2=rate_limit", "2=overloaded"}}, `--fault "2=overloaded": request 2 already has a fault`},
		{ServerFlags{Faults: []string{"2=rate_limit,retry_after=soon"}}, `retry_after "soon": want a duration`},
		{ServerFlags{Faults: []string{"2=cut_stream,after_bytes=-1"}}, `after_bytes "-1": want an integer from 0`},
		{ServerFlags{Faults: []string{"2=cut_stream,bytes=1"}}, `unknown key "bytes" (known: retry_after, delay, after_bytes)`},
		{ServerFlags{Faults: []string{"2=cut_stream,200"}}, `"200": want key=value`},
		{ServerFlags{RandomFault: "boom"}, `--random-fault "boom": unknown fault "boom"`},
		{ServerFlags{FaultRate: 1.5}, `--fault-rate 1.5: a rate is from 0 to 1`},
		{ServerFlags{Latency: -time.Second}, `--latency -1s: a delay cannot be negative`},
	} {
		var o Options
		err := c.f.Apply(&o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.f, err, c.want)
		}
	}
}
