package costbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm/fake"
)

// TestMain lets the test binary play the fake server too, so it runs in a
// process of its own and its CPU is not mixed with a client's. A client
// is the test binary running TestCostClient (client_test.go).
func TestMain(m *testing.M) {
	if os.Getenv("COSTBENCH_ROLE") == "fake" {
		os.Exit(serveFake())
	}
	pgtest.Main(m)
}

func serveFake() int {
	w, err := WorkloadFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sc, err := fake.ParseScenario([]byte(w.Scenario()), "costbench.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// No request log: nothing reads it, and it would only add to the
	// fake's own work.
	url, _, err := fake.NewServer(fake.Options{Responder: sc, FirstByte: w.Latency, MaxLogged: -1}).Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(url)
	// The harness ends this process by closing stdin.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// fakeServer is the fake LLM in its own process.
type fakeServer struct {
	url  string
	cmd  *exec.Cmd
	stop io.Closer
}

func startFake(w Workload) (*fakeServer, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "COSTBENCH_ROLE=fake"), w.Env()...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("fake server gave no URL: %w", err)
	}
	return &fakeServer{url: strings.TrimSpace(url), cmd: cmd, stop: in}, nil
}

func (f *fakeServer) close() error {
	f.stop.Close()
	return f.cmd.Wait()
}

// figures is one configuration's run, as its JSON line prints it.
type figures struct {
	Bench         string  `json:"bench"`
	Config        string  `json:"config"`
	N             int     `json:"n"`
	Turns         int     `json:"turns"`
	MaxParallel   int     `json:"max_parallel"`
	LatencyMS     int64   `json:"latency_ms"`
	WallMS        float64 `json:"wall_ms"`
	IdealMS       int64   `json:"ideal_ms"`
	WallOverIdeal float64 `json:"wall_over_ideal"`
	ClientCPUMS   float64 `json:"client_cpu_ms"`
	Mallocs       uint64  `json:"mallocs"`
	Requests      int64   `json:"requests"`
	Deltas        int64   `json:"deltas,omitempty"`
	Goal          string  `json:"goal,omitempty"`
	Met           *bool   `json:"met,omitempty"`
}

// wallGoal is each configuration's wall ÷ ideal goal (issue 19), on the
// workload it was set for.
func wallGoal(cfg string, w Workload) (float64, bool) {
	switch {
	case w == Default && cfg == "sqlite":
		return 1.20, true
	case w == Default && cfg == "postgres":
		return 1.50, true
	case w == Large && cfg == "sqlite":
		return 1.30, true
	case w == Large && cfg == "postgres":
		return 1.60, true
	}
	return 0, false
}

// runConfig runs one configuration's client process against the fake at
// url and returns its figures.
func runConfig(cfg, url string, w Workload) (*figures, error) {
	dir, err := os.MkdirTemp("", "costbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "result.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCostClient$", "-test.bench=^$", "-test.count=1", "-test.v=false")
	cmd.Env = append(append(os.Environ(), "COSTBENCH_ROLE=client", "COSTBENCH_CONFIG="+cfg, "COSTBENCH_URL="+url,
		"COSTBENCH_OUT="+out), w.Env()...)
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s client: %w\n%s", cfg, err, buf.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("%s client wrote no result: %w\n%s", cfg, err, buf.String())
	}
	var r clientResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s client's result %q: %w", cfg, raw, err)
	}
	ideal := w.Ideal().Milliseconds()
	f := &figures{Bench: "cost", Config: cfg, N: w.N, Turns: w.Turns, MaxParallel: w.MaxParallel,
		LatencyMS: w.Latency.Milliseconds(), WallMS: r.WallMS, IdealMS: ideal,
		ClientCPUMS: r.CPUMS, Mallocs: r.Mallocs, Requests: r.Requests, Deltas: r.Deltas}
	if ideal > 0 {
		f.WallOverIdeal = r.WallMS / float64(ideal)
	}
	if g, ok := wallGoal(cfg, w); ok && ideal > 0 {
		met := f.WallOverIdeal <= g
		f.Goal, f.Met = fmt.Sprintf("wall_over_ideal<=%.2f", g), &met
	}
	return f, nil
}

// ratio is one of the ratios, computed within one run.
type ratio struct {
	Bench string  `json:"bench"`
	Name  string  `json:"ratio"`
	Of    string  `json:"of"`
	Over  string  `json:"over"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal,omitempty"`
	Met   *bool   `json:"met,omitempty"`
}

// ratios are the CPU ratios over the configurations of one run
// that are there: durable ÷ in memory (both not streamed), in memory ÷ the
// bare loop (same SDK, not streamed; and both streamed, which has no goal).
func ratios(got map[string]*figures) []ratio {
	var out []ratio
	add := func(of, over string, goal float64) {
		a, b := got[of], got[over]
		if a == nil || b == nil || b.ClientCPUMS <= 0 {
			return
		}
		r := ratio{Bench: "cost-ratio", Name: "client_cpu", Of: of, Over: over, Value: a.ClientCPUMS / b.ClientCPUMS}
		if goal > 0 {
			met := r.Value <= goal
			r.Goal, r.Met = fmt.Sprintf("<=%.1f", goal), &met
		}
		out = append(out, r)
	}
	add("sqlite", "memory", 2.0)
	add("postgres", "memory", 2.0)
	add("memory", "bare-plain", 1.3)
	add("memory-stream", "bare-stream", 0)
	return out
}

// runAll runs cfgs against one fake server, each client in its own
// process, and returns their figures by config, printing a JSON line for
// each and for each ratio.
func runAll(tb testing.TB, w Workload, cfgs []string, print func(string)) map[string]*figures {
	tb.Helper()
	fk, err := startFake(w)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := fk.close(); err != nil {
			tb.Errorf("fake server: %v", err)
		}
	}()
	got := map[string]*figures{}
	for _, cfg := range cfgs {
		f, err := runConfig(cfg, fk.url, w)
		if err != nil {
			tb.Fatal(err)
		}
		got[cfg] = f
		print(jsonLine(f))
	}
	for _, r := range ratios(got) {
		print(jsonLine(r))
	}
	return got
}

// jsonLine is v as one JSON line, "<=" left readable.
func jsonLine(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// BenchmarkCost runs issue 19's workload (WorkloadFromEnv; COSTBENCH_PRESET=
// large for the 1,000-task one) in every configuration COSTBENCH_CONFIGS
// names, once per b.N, and prints one JSON line per configuration and per
// ratio. COSTBENCH_PROFILE=PREFIX makes each client write its CPU profile
// to PREFIX-CONFIG.pprof.
func BenchmarkCost(b *testing.B) {
	if testing.Short() {
		b.Skip("costbench runs subprocesses for tens of seconds; TestHarness checks it works")
	}
	w, err := WorkloadFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	cfgs, err := ConfigsFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		got := runAll(b, w, cfgs, func(s string) { fmt.Println(s) })
		if f := got["memory"]; f != nil {
			b.ReportMetric(f.ClientCPUMS, "memory-cpu-ms")
		}
	}
}

// TestHarness runs every configuration on a tiny workload, with no
// latency: each client must make exactly its N × T requests and see every
// answer it was scripted to (TestCostClient fails otherwise), and the
// figures must be there.
func TestHarness(t *testing.T) {
	t.Parallel()
	w := Workload{N: 3, Turns: 2, MaxParallel: 3}
	var lines []string
	got := runAll(t, w, Configs, func(s string) { lines = append(lines, s) })
	for _, cfg := range Configs {
		f := got[cfg]
		if f == nil || f.Requests != int64(w.Calls()) || f.ClientCPUMS <= 0 || f.Mallocs == 0 || f.WallMS <= 0 {
			t.Errorf("%s: figures %+v", cfg, f)
		}
	}
	if got["memory-stream"].Deltas == 0 {
		t.Error("memory-stream: its consumer got no deltas")
	}
	if got["memory"].Deltas != 0 {
		t.Errorf("memory: %d deltas, want none", got["memory"].Deltas)
	}
	if rs := ratios(got); len(rs) != 4 {
		t.Errorf("%d ratios, want 4: %v", len(rs), rs)
	}
	t.Log(strings.Join(lines, "\n"))
}
