package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/serve"
)

// benchEnv is a server over a real listener on a fresh database.
func benchEnv(b *testing.B, scenario string) (*deputy.Runtime, *httptest.Server, func()) {
	b.Helper()
	dir := b.TempDir()
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(scenario),
		DB: filepath.Join(dir, "deputy.db"), Workspace: dir, RunTools: deputy.BuiltinTools})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := serve.New(serve.Options{Runtime: rt, Token: token})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	return rt, hs, func() { srv.Close(); hs.Close(); rt.Close() }
}

// BenchmarkStatusRead: GET /api/instances/{id} over loopback HTTP from
// parallel clients, the way a dashboard or a script polls. Reports reads
// per second.
func BenchmarkStatusRead(b *testing.B) {
	rt, hs, stop := benchEnv(b, scenario)
	defer stop()
	in, err := rt.Run(context.Background(), deputy.Task{Text: "x"}) // settles asking: a live instance
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := hs.URL + "/api/instances/" + in.ID
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
}

// busyScenario: a root that asks first (so streams can subscribe to its
// tree before it works), then makes many quick tool calls: a run that
// writes events as fast as deputy can.
func busyScenario(turns int) string {
	return fmt.Sprintf(`
rules:
  - match: {turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "go?"}}]
  - match: {turn: "2-%d"}
    tool_calls:
      - {name: glob, input: {pattern: "*.md"}}
      - {name: glob, input: {pattern: "*.go"}}
  - match: {turn: "%d-"}
    text: "done"
`, turns+1, turns+2)
}

// BenchmarkSSEFanout: 1,000 subscribers to one run's tree stream over
// loopback HTTP while the run writes events. Reports the events delivered
// per second over all subscribers and the delivery lag (an event's store
// time to its arrival at a subscriber), p50 and p99.
func BenchmarkSSEFanout(b *testing.B) {
	subs, turns := 1000, 40
	if testing.Short() {
		subs, turns = 50, 5
	}
	var lags []time.Duration
	var delivered int
	var wall time.Duration
	for range b.N {
		l, d, w := sseFanout(b, subs, turns)
		lags, delivered, wall = append(lags, l...), delivered+d, wall+w
	}
	slices.Sort(lags)
	b.ReportMetric(float64(delivered)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
	b.ReportMetric(float64(delivered)/float64(b.N*subs), "events/sub")
}

func sseFanout(b *testing.B, subs, turns int) (lags []time.Duration, delivered int, wall time.Duration) {
	b.StopTimer()
	rt, hs, stop := benchEnv(b, busyScenario(turns))
	defer stop()
	ctx := context.Background()
	in, err := rt.Run(ctx, deputy.Task{Text: "busy", MaxTurns: turns + 5})
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: subs, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	type result struct {
		lags []time.Duration
		n    int
		err  error
	}
	results := make(chan result, subs)
	var ready sync.WaitGroup
	ready.Add(subs)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range subs {
		go func() {
			r := result{}
			defer func() { results <- r }()
			req, _ := http.NewRequestWithContext(sctx, "GET", hs.URL+"/api/trees/"+in.ID+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				r.err = err
				ready.Done()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 64<<10)
			first := true
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					r.err = err
					return
				}
				data, ok := strings.CutPrefix(string(line), "data: ")
				if !ok {
					continue
				}
				now := time.Now()
				if first { // the ready frame
					first = false
					ready.Done()
					continue
				}
				var ev struct {
					At   time.Time `json:"at"`
					Kind string    `json:"kind"`
					Data struct{ To string }
				}
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					r.err = err
					return
				}
				r.n++
				r.lags = append(r.lags, now.Sub(ev.At))
				if ev.Kind == "state" && ev.Data.To == "completed" {
					return
				}
			}
		}()
	}
	ready.Wait()
	b.StartTimer()
	start := time.Now()
	if err := rt.Answer(ctx, in.ID, "go"); err != nil {
		b.Fatal(err)
	}
	for range subs {
		r := <-results
		if r.err != nil {
			b.Fatal(r.err)
		}
		lags = append(lags, r.lags...)
		delivered += r.n
	}
	wall = time.Since(start)
	b.StopTimer()
	return lags, delivered, wall
}
