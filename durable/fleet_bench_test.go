//go:build unix

package durable_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// benchFleet starts n workers (cap runs each) on a fresh database, all on
// one model server with scenario script, and returns the fleet, the
// database URL and a store on it.
func benchFleet(b *testing.B, n, runs int, script string) (*fleet, string, *store.Store) {
	b.Helper()
	s, err := fake.ParseScenario([]byte(script), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: s}))
	b.Cleanup(hs.Close)
	url := pgtest.URL(b)
	f := newFleet(b, buildDeputy(b), url)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("w%d", i)
		cmd := f.cmd("worker", "-q", "--workspace", f.ws, "--executor-id", id, "--max-runs", fmt.Sprint(runs))
		cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+hs.URL)
		f.startCmd(id, cmd)
	}
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return f, url, st
}

const distributionScenario = `
latency: {first_byte: 200ms}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {system: "read-only explorer"}
    text: "looked"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 60, input: {subagent_type: explorer, task: "look {{.I}}", background: true}}]
default:
  text: "noted"
`

// BenchmarkFleetDistribution: a root with 60 background children (two
// model calls of 200 ms each) on 1, 2 and 3 workers of 4 runs each.
// children/s is the children completed per second, from the run's
// queueing to its root's end; ideal/s is what the workers' places allow
// at the model latency alone (the root keeps one place as it waits).
func BenchmarkFleetDistribution(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			var total time.Duration
			var parts timeline
			for range b.N {
				f, url, st := benchFleet(b, n, 4, distributionScenario)
				busy0, all0 := cpuTicks()
				start := time.Now()
				out, err := f.cmd("run", "--detach", "-q", "--model", "anthropic:fake", "--max-parallel", "100",
					"--workspace", f.ws, "fan out").CombinedOutput()
				if err != nil {
					b.Fatalf("run --detach: %v\n%s", err, out)
				}
				root := strings.TrimSpace(string(out))
				waitRoot(b, f, st, root)
				total += time.Since(start)
				busy1, all1 := cpuTicks()
				parts.cpuBusy += float64(busy1 - busy0)
				parts.cpuAll += float64(all1 - all0)
				parts.add(b, url)
				for i := 1; i <= n; i++ {
					_ = f.stop(fmt.Sprintf("w%d", i), syscall.SIGTERM)
				}
			}
			perRun := total / time.Duration(b.N)
			b.ReportMetric(60/perRun.Seconds(), "children/s")
			// The places run a child in 2×200 ms each, but for the one
			// the root holds while it waits for its children.
			b.ReportMetric(float64(4*n-1)/0.4, "ideal/s")
			parts.report(b)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// timeline is where a fan-out's time went, from DBOS's record of its
// workflows (milliseconds, summed over the benchmark's runs): the root's
// start until its last spawn was queued, each child's wait in the queue
// and its run, the span from the first child's start to the last one's
// end, and the last child's end until the root's.
type timeline struct {
	runs                                   int
	spawning, queued, running, span, after float64
	children                               int
	cpuBusy, cpuAll                        float64 // the machine's CPU ticks during the runs
	refill                                 float64
	refills                                int
}

// cpuTicks reads the machine's busy and total CPU time from /proc/stat
// (Linux; zeros elsewhere): is a latency-bound benchmark CPU-bound after all?
func cpuTicks() (busy, all uint64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	// cpu user nice system idle iowait irq softirq steal (guest time is
	// counted in user already)
	fields := strings.Fields(line)
	if len(fields) < 9 {
		return 0, 0
	}
	for i, f := range fields[1:9] {
		v, _ := strconv.ParseUint(f, 10, 64)
		all += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, all
}

func (tl *timeline) add(b *testing.B, url string) {
	b.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var rootStart, rootEnd, firstStart, lastQueued, lastEnd, queued, running float64
	var n int
	if err := db.QueryRow(`SELECT started_at_epoch_ms, updated_at FROM dbos.workflow_status
		WHERE name = 'deputy.instance'`).Scan(&rootStart, &rootEnd); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*), min(started_at_epoch_ms), max(created_at), max(updated_at),
		sum(started_at_epoch_ms - created_at), sum(updated_at - started_at_epoch_ms)
		FROM dbos.workflow_status WHERE name = 'deputy.child'`).Scan(&n, &firstStart, &lastQueued, &lastEnd,
		&queued, &running); err != nil {
		b.Fatal(err)
	}
	// How long a place stood empty with work waiting: from a child's end
	// to the next start on its worker of a child queued by then.
	var refill sql.NullFloat64
	var refills int
	if err := db.QueryRow(`SELECT count(n.started), sum(n.started - c.updated_at)
		FROM dbos.workflow_status c CROSS JOIN LATERAL (
			SELECT min(x.started_at_epoch_ms) AS started FROM dbos.workflow_status x
			WHERE x.name = 'deputy.child' AND x.executor_id = c.executor_id
			AND x.started_at_epoch_ms >= c.updated_at AND x.created_at <= c.updated_at) n
		WHERE c.name = 'deputy.child' AND n.started IS NOT NULL`).Scan(&refills, &refill); err != nil {
		b.Fatal(err)
	}
	tl.refill += refill.Float64
	tl.refills += refills
	tl.runs++
	tl.children += n
	tl.spawning += lastQueued - rootStart
	tl.queued += queued
	tl.running += running
	tl.span += lastEnd - firstStart
	tl.after += rootEnd - lastEnd
}

func (tl *timeline) report(b *testing.B) {
	r, c := float64(tl.runs), float64(tl.children)
	b.ReportMetric(tl.spawning/r, "spawning-ms")
	b.ReportMetric(tl.queued/c, "queued-ms/child")
	b.ReportMetric(tl.running/c, "run-ms/child")
	b.ReportMetric(tl.span/r, "children-span-ms")
	b.ReportMetric(tl.after/r, "root-after-ms")
	if tl.refills > 0 {
		b.ReportMetric(tl.refill/float64(tl.refills), "refill-ms")
	}
	if tl.cpuAll > 0 {
		b.ReportMetric(100*tl.cpuBusy/tl.cpuAll, "cpu-busy-%")
	}
}

// waitRoot waits for root to end, failing on a worker's death. The
// workers' commits wake it (EventsWritten listens on Postgres).
func waitRoot(b *testing.B, f *fleet, st *store.Store, root string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !eventually(ctx, st.EventsWritten, func() bool {
		if id := f.died(); id != "" {
			b.Fatalf("worker %s died:\n%s", id, f.log(id))
		}
		in, err := st.GetInstance(ctx, root)
		if err == nil && in.State.Terminal() && in.State != instance.Completed {
			b.Fatalf("root %s: %s", in.State, in.Error)
		}
		return err == nil && in.State.Terminal()
	}) {
		b.Fatal("the root never ended")
	}
}

// BenchmarkTakeover: a root's second model call hangs on worker w1, which
// is killed with SIGKILL there; w2, on the default lease, takes the run
// over. takeover-s is the time from the kill to the resumed call's arrival
// at w2's model server.
func BenchmarkTakeover(b *testing.B) {
	const script = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {turn: 2}
    latency: {first_byte: 10m}
    text: "never, on w1"
default:
  text: "done"
`
	const resumed = `
default:
  text: "done on w2"
`
	var total time.Duration
	for range b.N {
		url := pgtest.URL(b)
		f := newFleet(b, buildDeputy(b), url)
		st, err := store.Open(context.Background(), url, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		second := make(chan struct{}, 1)
		var calls atomic.Int64
		arrived := make(chan time.Time, 1)
		for i, sc := range []string{script, resumed} {
			s, err := fake.ParseScenario([]byte(sc), "takeover.yaml")
			if err != nil {
				b.Fatal(err)
			}
			srv := fake.NewServer(fake.Options{Responder: s})
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if i == 0 && calls.Add(1) == 2 {
					second <- struct{}{}
				}
				if i == 1 {
					select {
					case arrived <- time.Now():
					default:
					}
				}
				srv.ServeHTTP(w, r)
			}))
			b.Cleanup(hs.Close)
			id := fmt.Sprintf("w%d", i+1)
			cmd := f.cmd("worker", "-q", "--workspace", f.ws, "--executor-id", id)
			cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+hs.URL)
			if i == 1 {
				<-second // w2 starts once w1 holds the run
			}
			f.startCmd(id, cmd)
			if i == 0 {
				out, err := f.cmd("run", "--detach", "-q", "--model", "anthropic:fake", "--workspace", f.ws, "hang").CombinedOutput()
				if err != nil {
					b.Fatalf("run --detach: %v\n%s", err, out)
				}
			}
		}
		// w2 has joined before w1 dies: a live fleet, not a lone survivor.
		waitUntil(b, st.EventsWritten, "w2 live in the fleet", func() bool {
			if id := f.died(); id != "" {
				b.Fatalf("worker %s died:\n%s", id, f.log(id))
			}
			ws, err := st.Workers(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			return slices.ContainsFunc(ws, func(w store.Worker) bool { return w.ID == "w2" && w.State == store.WorkerLive })
		})
		killed := time.Now()
		if err := f.stop("w1", syscall.SIGKILL); err == nil {
			b.Fatal("w1 survived SIGKILL")
		}
		select {
		case at := <-arrived:
			total += at.Sub(killed)
		case <-time.After(2 * time.Minute):
			b.Fatalf("the run never resumed on w2:\n%s", f.log("w2"))
		}
		_ = f.stop("w2", syscall.SIGTERM)
	}
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "takeover-s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRoundTripsPerTurn counts the Postgres round trips of a durable
// turn (deputy's store and DBOS together): every connection goes through
// a proxy that counts each client message answered by the server.
// benchloop's 10-turn run (9 tool calls), alone and as a worker of a fleet.
func BenchmarkRoundTripsPerTurn(b *testing.B) {
	for _, fleetMode := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "fleet"}[fleetMode], func(b *testing.B) {
			u, err := neturl.Parse(pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			p := newCountingProxy(b, u.Host)
			u.Host = p.addr
			ctx := context.Background()
			st, err := store.Open(ctx, u.String(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			scen, err := fake.ParseScenario([]byte(benchloop.Scenario(benchTurns)), "bench-loop.yaml")
			if err != nil {
				b.Fatal(err)
			}
			model := fake.NewModel(scen, fake.WithoutLatency())
			opts := durable.Options{Store: st, URL: u.String(),
				Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
				Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet(benchloop.Noop{}) }}
			if fleetMode {
				opts.ExecutorID, opts.Lease = "bench", time.Minute // renewals every 20 s: none in a run
			}
			e, err := durable.Open(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(5 * time.Second)
			var trips int64
			b.ResetTimer()
			for range b.N {
				before := p.trips.Load()
				id, err := e.Start(ctx, "bench", durable.Spec{System: "bench", Model: "fake", MaxTurns: benchTurns + 5})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := e.Wait(ctx, id); err != nil {
					b.Fatal(err)
				}
				trips += p.trips.Load() - before
			}
			b.ReportMetric(float64(trips)/float64(b.N*benchTurns), "round-trips/turn")
		})
	}
}

// countingProxy forwards TCP to a Postgres server and counts round trips:
// a client write that follows a server write (or opens the connection)
// starts one.
type countingProxy struct {
	addr  string
	trips atomic.Int64
}

func newCountingProxy(b *testing.B, target string) *countingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &countingProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			var serverSpoke atomic.Bool
			serverSpoke.Store(true)
			wg.Go(func() { p.pipe(s, c, &serverSpoke, true) })
			wg.Go(func() { p.pipe(c, s, &serverSpoke, false) })
		}
	})
	return p
}

// pipe copies src to dst; client says whether src is the client.
func (p *countingProxy) pipe(dst, src net.Conn, serverSpoke *atomic.Bool, client bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if client {
				if serverSpoke.Swap(false) {
					p.trips.Add(1)
				}
			} else {
				serverSpoke.Store(true)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
