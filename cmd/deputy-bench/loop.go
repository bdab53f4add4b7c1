package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
)

// `deputy-bench loop`: the agent loop's cost per turn (issue 2), on the
// workload of internal/benchloop, which `go test -bench` in package loop
// runs too.

// loopFigure is one line of `deputy-bench loop` output.
type loopFigure struct {
	Scenario      string  `json:"scenario"`
	Via           string  `json:"via"`
	Runs          int     `json:"runs"`
	TurnsPerRun   int     `json:"turns_per_run"`
	Repeats       int     `json:"repeats"`
	NsPerTurn     float64 `json:"ns_per_turn"`     // wall time, median of repeats
	CPUNsPerTurn  float64 `json:"cpu_ns_per_turn"` // this process's user+system CPU, median
	AllocsPerTurn float64 `json:"allocs_per_turn"` // heap allocations, median
	BytesPerTurn  float64 `json:"bytes_per_turn"`
}

// loopVias are the ways the loop can reach its model.
var loopVias = []string{"inprocess", "anthropic", "openai"}

func newLoopCmd(repeats *int) *cobra.Command {
	var via string
	var runs, turns int
	cmd := &cobra.Command{
		Use:   "loop [--via inprocess,anthropic,openai] [--runs N] [--turns T] [--repeats R]",
		Short: "The agent loop's cost per turn, in process or through the fake API over loopback HTTP",
		Long: `Runs the agent loop on a scripted scenario of one no-op tool call per turn,
either on the in-process scripted model or through the real Anthropic / OpenAI
clients against a fake model server in a child process on loopback, so the
figures are the client side only. Prints one JSON object per --via value:
wall, CPU and allocations per turn, medians of --repeats.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vias, err := parseChoices("--via", via, loopVias)
			if err != nil {
				return err
			}
			if runs < 1 || turns < 2 {
				return usageErr("--runs must be at least 1, --turns at least 2")
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, v := range vias {
				fig, err := benchLoop(cmd.Context(), cmd.ErrOrStderr(), v, runs, turns, *repeats)
				if err != nil {
					return failed(fmt.Errorf("loop via %s: %w", v, err))
				}
				if err := enc.Encode(fig); err != nil {
					return failed(err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&via, "via", strings.Join(loopVias, ","), "comma-separated: "+strings.Join(loopVias, ", "))
	f.IntVar(&runs, "runs", 200, "loop runs per repeat")
	f.IntVar(&turns, "turns", 10, "turns per run (the last one answers)")
	return cmd
}

func benchLoop(ctx context.Context, stderr io.Writer, via string, runs, turns, repeats int) (*loopFigure, error) {
	var model llm.Model
	if via == "inprocess" {
		s, err := fake.ParseScenario([]byte(benchloop.Scenario(turns)), "bench-loop.yaml")
		if err != nil {
			return nil, err
		}
		model = fake.NewModel(s, fake.WithoutLatency())
	} else {
		url, stop, err := startFakeLLM(ctx, stderr, turns)
		if err != nil {
			return nil, err
		}
		defer stop()
		env := map[string]string{"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url,
			"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": url + "/v1"}
		model, err = provider.New(via+":fake", provider.Options{Getenv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		}})
		if err != nil {
			return nil, err
		}
	}
	cfg := benchloop.Config(model)
	once := func() error { return benchloop.Run(ctx, cfg, turns) }
	if err := once(); err != nil { // warm up connections and caches
		return nil, err
	}
	var wall, cpu, allocs, bytes []float64
	n := float64(runs * turns)
	for range repeats {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c0, t0 := cpuTime(), time.Now()
		for range runs {
			if err := once(); err != nil {
				return nil, err
			}
		}
		elapsed, c1 := time.Since(t0), cpuTime()
		runtime.ReadMemStats(&m1)
		wall = append(wall, float64(elapsed.Nanoseconds())/n)
		cpu = append(cpu, float64((c1-c0).Nanoseconds())/n)
		allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/n)
		bytes = append(bytes, float64(m1.TotalAlloc-m0.TotalAlloc)/n)
	}
	f := &loopFigure{Scenario: "loop", Via: via, Runs: runs, TurnsPerRun: turns, Repeats: repeats}
	f.NsPerTurn, _, _ = stats(wall)
	f.CPUNsPerTurn, _, _ = stats(cpu)
	f.AllocsPerTurn, _, _ = stats(allocs)
	f.BytesPerTurn, _, _ = stats(bytes)
	return f, nil
}

// fakeLLMBanner starts the one line the child server prints, before its URL.
const fakeLLMBanner = "deputy-bench fakellm listening on "

// startFakeLLM runs this program's hidden fakellm command as a child
// process, so the server's CPU and allocations are not counted as the
// client's. The child lives as long as its stdin is open: stop closes it,
// and if this process dies first the kernel closes it, so no server is
// left behind either way.
func startFakeLLM(ctx context.Context, stderr io.Writer, turns int) (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find this program to start the fake server: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "fakellm", "--turns", strconv.Itoa(turns))
	cmd.Stderr = stderr
	lifeline, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	// The child prints its one line and nothing after, so nothing has to
	// drain the pipe, which Wait closes.
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the fake server: %w", err)
	}
	stop = func() {
		_ = lifeline.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), fakeLLMBanner)
	if err != nil || !ok {
		stop()
		return "", nil, fmt.Errorf("the fake server did not start: printed %q (%v)", line, err)
	}
	return addr, stop, nil
}

// newFakeLLMCmd is the loop benchmark's child: the fake server `deputy
// fakellm` runs, on the loop's scenario. Unlike deputy fakellm it does not
// put deputy serve's connection limits in front (serve.Harden): its only
// client is its parent on loopback, and the serve package would bring the
// whole runtime into this program for it.
func newFakeLLMCmd() *cobra.Command {
	var turns int
	cmd := &cobra.Command{
		Use:    "fakellm --turns T",
		Short:  "Serve the loop benchmark's scenario on loopback until stdin closes (started by loop)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if turns < 2 {
				return usageErr("--turns must be at least 2")
			}
			s, err := fake.ParseScenario([]byte(benchloop.Scenario(turns)), "bench-loop.yaml")
			if err != nil {
				return failed(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return failed(fmt.Errorf("listen: %w", err))
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			go func() { // the lifeline: EOF when the parent closes it or dies
				_, _ = io.Copy(io.Discard, cmd.InOrStdin())
				cancel()
			}()
			srv := &http.Server{Handler: fake.NewServer(fake.Options{Responder: s}), ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			fmt.Fprintf(cmd.OutOrStdout(), "%shttp://%s\n", fakeLLMBanner, ln.Addr())
			select {
			case err := <-errc:
				return failed(fmt.Errorf("serve: %w", err))
			case <-ctx.Done():
			}
			shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
			defer stop()
			if err := srv.Shutdown(shutdown); err != nil {
				return failed(fmt.Errorf("shut down: %w", err))
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return failed(fmt.Errorf("serve: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&turns, "turns", 10, "turns of the loop scenario")
	return cmd
}
