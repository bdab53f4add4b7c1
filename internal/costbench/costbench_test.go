package costbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm/fake"
	dopenai "github.com/deputy-run/deputy/llm/openai"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestMain lets the test binary play the fake server or one client, so each
// runs in its own process and its CPU is not mixed with the harness's.
func TestMain(m *testing.M) {
	switch os.Getenv("COSTBENCH_ROLE") {
	case "fake":
		os.Exit(serveFake())
	case "client":
		os.Exit(runClient())
	}
	os.Exit(m.Run())
}

func serveFake() int {
	w, err := WorkloadFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	url, _, err := fake.NewServer(fake.Options{FirstByte: w.Latency}).Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(url)
	// The harness ends this process by closing stdin.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// runClient runs one configuration and prints its mallocs delta.
func runClient() int {
	w, err := WorkloadFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	cfg, url := os.Getenv("COSTBENCH_CONFIG"), os.Getenv("COSTBENCH_URL")
	if cfg == "memory" {
		err = runMemory(context.Background(), url, w)
	} else {
		err = runBare(context.Background(), url, w, cfg == "bare-stream")
	}
	wall := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d\n", wall.Milliseconds(), after.Mallocs-before.Mallocs)
	return 0
}

// runBare is the floor: N goroutines × T plain openai-go chat completions.
func runBare(ctx context.Context, url string, w Workload, stream bool) error {
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	return inParallel(w.N, func(i int) error {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
		for t := 0; t < w.Turns; t++ {
			p := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs}
			if stream {
				s := c.Chat.Completions.NewStreaming(ctx, p)
				for s.Next() {
				}
				if err := s.Err(); err != nil {
					return fmt.Errorf("child %d turn %d: %w", i, t, err)
				}
			} else if _, err := c.Chat.Completions.New(ctx, p); err != nil {
				return fmt.Errorf("child %d turn %d: %w", i, t, err)
			}
			msgs = append(msgs, openai.AssistantMessage("ok"), openai.UserMessage("again"))
		}
		return nil
	})
}

// inParallel runs fn(0..n-1) at once and returns the first error any
// returned: every configuration's N children start together.
func inParallel(n int, fn func(i int) error) error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runMemory runs N independent in-memory agent runs at once through deputy's
// openai provider, not streamed. The fake's default responder ends each run
// after one turn, so this measures one turn per run, not T.
func runMemory(ctx context.Context, url string, w Workload) error {
	m, err := dopenai.New("gpt-4o-mini", dopenai.Options{APIKey: "k", BaseURL: url + "/v1", NonStreaming: true})
	if err != nil {
		return err
	}
	r := &agent.Runner{}
	return inParallel(w.N, func(i int) error {
		if _, err := r.Run(ctx, agent.Task{Task: "hi", Model: m, ModelName: "gpt-4o-mini"}); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		return nil
	})
}

func BenchmarkCost(b *testing.B) {
	if testing.Short() {
		b.Skip("costbench runs subprocesses for tens of seconds")
	}
	w, err := WorkloadFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	fk := exec.Command(os.Args[0])
	fk.Env = append(os.Environ(), "COSTBENCH_ROLE=fake")
	in, _ := fk.StdinPipe()
	out, _ := fk.StdoutPipe()
	fk.Stderr = os.Stderr
	if err := fk.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = fk.Wait() }()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("fake server gave no URL: %v", err)
	}
	url = strings.TrimSpace(url)
	for _, cfg := range []string{"bare-plain", "bare-stream", "memory"} {
		b.Run(cfg, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runConfig(b, cfg, url, w)
			}
		})
	}
}

func runConfig(b *testing.B, cfg, url string, w Workload) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "COSTBENCH_ROLE=client", "COSTBENCH_CONFIG="+cfg, "COSTBENCH_URL="+url)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s client: %v", cfg, err)
	}
	var wallMS, mallocs int64
	if _, err := fmt.Sscan(string(raw), &wallMS, &mallocs); err != nil {
		b.Fatalf("%s client output %q: %v", cfg, raw, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	turns := w.Turns
	if cfg == "memory" {
		turns = 1 // see runMemory
	}
	ideal := int64(turns) * w.Latency.Milliseconds()
	line, _ := json.Marshal(map[string]any{"bench": "cost", "config": cfg, "n": w.N, "turns": turns,
		"latency_ms": w.Latency.Milliseconds(), "wall_ms": wallMS, "ideal_ms": ideal,
		"wall_over_ideal": float64(wallMS) / float64(ideal), "client_cpu_ms": cpu.Milliseconds(),
		"mallocs": mallocs, "goal": "wall_over_ideal<=1.20"})
	fmt.Println(string(line))
	b.ReportMetric(float64(wallMS)/float64(ideal), "wall/ideal")
	b.ReportMetric(float64(cpu.Milliseconds()), "cpu-ms")
	b.ReportMetric(float64(mallocs), "mallocs")
}
