package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
)

// The fake server's throughput on each wire it speaks: requests per second
// a Go client gets from the fake in a process of its own (the loop
// benchmark's child, on its scenario: every first turn answers one tool
// call), over loopback, streamed and not.

// fakeWire is one wire's request: its path, a body for stream on or off,
// and what a whole answer ends with.
type fakeWire struct {
	name, path string
	body       func(stream bool) string
	end        func(stream bool) string
}

// fakeWires are the wires, as their SDKs send a first turn with one tool.
var fakeWires = []fakeWire{
	{"anthropic", "/v1/messages",
		func(stream bool) string {
			return fmt.Sprintf(`{"model":"claude-bench","max_tokens":1024,"stream":%v,"messages":[{"role":"user","content":"bench"}],`+
				`"tools":[{"name":"noop","description":"does nothing","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]}`, stream)
		},
		func(stream bool) string {
			return map[bool]string{true: "event: message_stop", false: `"stop_reason":"tool_use"`}[stream]
		}},
	{"chat", "/v1/chat/completions",
		func(stream bool) string {
			opts := ""
			if stream {
				opts = `"stream_options":{"include_usage":true},`
			}
			return fmt.Sprintf(`{"model":"gpt-bench","stream":%v,%s"messages":[{"role":"user","content":"bench"}],`+
				`"tools":[{"type":"function","function":{"name":"noop","description":"does nothing","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]}`, stream, opts)
		},
		func(stream bool) string {
			return map[bool]string{true: "data: [DONE]", false: `"finish_reason":"tool_calls"`}[stream]
		}},
	// store: false, so the fake keeps no response for previous_response_id
	// and the run measures answering, not a growing map.
	{"responses", "/v1/responses",
		func(stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-bench","stream":%v,"store":false,"input":"bench",`+
				`"tools":[{"type":"function","name":"noop","description":"does nothing","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]}`, stream)
		},
		func(stream bool) string {
			return map[bool]string{true: "event: response.completed", false: `"type":"function_call"`}[stream]
		}},
}

// wireFigure is one line of `deputy-bench fakewire`.
type wireFigure struct {
	Benchmark   string  `json:"benchmark"` // fakewire
	Figure      string  `json:"figure"`    // requests_per_second
	Wire        string  `json:"wire"`
	Stream      bool    `json:"stream"`
	Value       float64 `json:"value"` // median over repeats
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	Unit        string  `json:"unit"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"` // each repeat's length
	Repeats     int     `json:"repeats"`
}

func newFakeWireCmd(repeats *int) *cobra.Command {
	var wires string
	var conc int
	var dur time.Duration
	names := make([]string, len(fakeWires))
	for i, w := range fakeWires {
		names[i] = w.name
	}
	cmd := &cobra.Command{
		Use:   "fakewire [--wires anthropic,chat,responses] [--concurrency N] [--duration D]",
		Short: "The fake server's requests/s on each wire, streamed and not, in its own process over loopback",
		Example: `  go run ./cmd/deputy-bench fakewire
  go run ./cmd/deputy-bench fakewire --wires anthropic --concurrency 8 --duration 5s --repeats 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			chosen, err := parseChoices("--wires", wires, names)
			if err != nil {
				return err
			}
			if conc < 1 || dur <= 0 {
				return usageErr("--concurrency must be at least 1 and --duration positive")
			}
			url, stop, err := startFakeLLM(cmd.Context(), cmd.ErrOrStderr(), 10)
			if err != nil {
				return failed(err)
			}
			defer stop()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
			defer client.CloseIdleConnections()
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, w := range fakeWires {
				if !slices.Contains(chosen, w.name) {
					continue
				}
				for _, stream := range []bool{false, true} {
					f, err := measureWire(cmd.Context(), client, url, w, stream, conc, dur, *repeats)
					if err != nil {
						return failed(err)
					}
					if err := enc.Encode(f); err != nil {
						return failed(err)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&wires, "wires", strings.Join(names, ","), "comma-separated: "+strings.Join(names, ", "))
	cmd.Flags().IntVar(&conc, "concurrency", 4, "requests in flight at once (connections)")
	cmd.Flags().DurationVar(&dur, "duration", 2*time.Second, "length of each repeat")
	return cmd
}

// measureWire runs repeats rounds of dur each, conc clients sending w's
// request back to back, and returns the median rate. Every answer must be
// a 200 ending as the wire's answers end: a fast error is no throughput.
func measureWire(ctx context.Context, client *http.Client, url string, w fakeWire, stream bool, conc int, dur time.Duration, repeats int) (wireFigure, error) {
	body, end := []byte(w.body(stream)), []byte(w.end(stream))
	// One request first: a wire the server does not speak fails here,
	// saying what it answered.
	if err := sendOne(ctx, client, url+w.path, body, end); err != nil {
		return wireFigure{}, fmt.Errorf("%s (stream %v): %w", w.name, stream, err)
	}
	rates := make([]float64, 0, repeats)
	for range repeats {
		var done atomic.Int64
		var firstErr error
		var once sync.Once
		rctx, cancel := context.WithTimeout(ctx, dur)
		begun := time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for rctx.Err() == nil {
					err := sendOne(rctx, client, url+w.path, body, end)
					switch {
					case err == nil:
						done.Add(1)
					case rctx.Err() == nil:
						once.Do(func() { firstErr = err; cancel() })
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(begun)
		cancel()
		if firstErr != nil {
			return wireFigure{}, fmt.Errorf("%s (stream %v): %w", w.name, stream, firstErr)
		}
		rates = append(rates, float64(done.Load())/elapsed.Seconds())
	}
	med, lo, hi := stats(rates)
	return wireFigure{Benchmark: "fakewire", Figure: "requests_per_second", Wire: w.name, Stream: stream, Value: med, Min: lo, Max: hi,
		Unit: "req/s", Concurrency: conc, Seconds: dur.Seconds(), Repeats: repeats}, nil
}

// sendOne posts body and reads the whole answer, which must be a 200
// containing end.
func sendOne(ctx context.Context, client *http.Client, url string, body, end []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "bench")
	req.Header.Set("anthropic-version", "2023-06-01")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || !bytes.Contains(got, end) {
		return fmt.Errorf("answered %d, not ending in %q: %.300s", res.StatusCode, end, got)
	}
	return nil
}
