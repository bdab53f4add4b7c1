package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// bin is deputy-bench built once for the package: the loop benchmark starts
// its server as a child of its own binary, which a test binary is not.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deputy-bench-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "deputy-bench")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build deputy-bench: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	// goleak.VerifyTestMain would exit before the clean-up; check by hand.
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// bench runs the binary, without the developer's Postgres URL.
func bench(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// figures decodes one JSON object per line, checking each has keys.
func figures(t *testing.T, out string, keys ...string) []map[string]any {
	t.Helper()
	var fs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		for _, k := range keys {
			if _, ok := f[k]; !ok {
				t.Fatalf("no %q in %s", k, line)
			}
		}
		fs = append(fs, f)
	}
	return fs
}

// TestLoopPrintsFigures runs the loop benchmark tiny, through every path
// (the HTTP ones through the child server), and checks that each line is a
// plausible figure.
func TestLoopPrintsFigures(t *testing.T) {
	t.Parallel()
	out, errOut, code := bench(t, "loop", "--runs", "2", "--turns", "3", "--repeats", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fs := figures(t, out, "scenario", "via", "runs", "turns_per_run", "repeats", "ns_per_turn", "cpu_ns_per_turn",
		"allocs_per_turn", "bytes_per_turn")
	if len(fs) != 3 {
		t.Fatalf("want 3 figures, got:\n%s", out)
	}
	for i, via := range loopVias {
		f := fs[i]
		if f["via"] != via || f["turns_per_run"] != 3.0 || f["ns_per_turn"].(float64) <= 0 || f["allocs_per_turn"].(float64) <= 0 {
			t.Fatalf("figure %d: %v", i, f)
		}
	}
}

// TestSubagentsPrintsFigures runs issue 4's figures on one wire, the
// fan-out small: two lines each, every one with its goal.
func TestSubagentsPrintsFigures(t *testing.T) {
	t.Parallel()
	out, errOut, code := bench(t, "subagents", "--wires", "openai", "--repeats", "1", "--fanout-children", "4",
		"--fanout-parallel", "2", "--fanout-turns", "2", "--fanout-latency", "2ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fs := figures(t, out, "benchmark", "figure", "wire", "value", "unit", "goal", "met", "repeats", "min", "max")
	var got []string
	for _, f := range fs {
		got = append(got, f["benchmark"].(string)+"/"+f["figure"].(string))
		if f["wire"] != "openai" {
			t.Fatalf("figure on another wire: %v", f)
		}
	}
	want := "economy/tokens_into_parent_per_child economy/child_over_parent_tokens fork/min_prefix_share " +
		"fork/min_cache_read_share fanout/wall_over_ideal fanout/deputy_vs_bare_sdk_wall_over_ideal"
	if strings.Join(got, " ") != want {
		t.Fatalf("figures %v, want %s", got, want)
	}
}

// TestOrchestrationPrintsFigures is .ci/run's command: every figure of both
// workloads, in memory beside the bare loop and on SQLite.
func TestOrchestrationPrintsFigures(t *testing.T) {
	t.Parallel()
	out, errOut, code := bench(t, "orchestration", "--wires", "anthropic", "--repeats", "1", "--orch-vias", "memory,sqlite",
		"--orch-tasks", "20", "--orch-parallel", "5", "--orch-turns", "2", "--orch-latency", "5ms", "--orch-dag", "6,3,1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []string
	for _, f := range figures(t, out, "benchmark", "figure", "wire", "via", "value", "goal", "met") {
		if f["benchmark"] != "orchestration" {
			t.Fatalf("not an orchestration figure: %v", f)
		}
		got = append(got, f["figure"].(string)+"/"+f["via"].(string))
	}
	want := "fanout_wall_over_ideal/memory fanout_wall_over_ideal/sqlite fanout_deputy_vs_bare_sdk/memory " +
		"dag_wall_over_critical_path/memory dag_wall_over_critical_path/sqlite"
	if strings.Join(got, " ") != want {
		t.Fatalf("figures %v, want %s", got, want)
	}
}

// TestBadInputIsAUsageError: every refusal is exit 2 with a line saying
// what is wrong, and runs nothing (so it is quick, in process).
func TestBadInputIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "name a benchmark"},
		{[]string{"lop"}, `unknown command "lop"`},
		{[]string{"loop", "--repeats", "0"}, "--repeats must be at least 1"},
		{[]string{"loop", "--via", "inprocess,grpc"}, `unknown --via value "grpc" (have: inprocess, anthropic, openai)`},
		{[]string{"loop", "--via", ","}, "--via is empty"},
		{[]string{"loop", "--turns", "1"}, "--turns at least 2"},
		{[]string{"loop", "--wires", "openai"}, "unknown flag: --wires"},
		{[]string{"subagents", "--figures", "economy,speed"}, `unknown --figures value "speed"`},
		{[]string{"subagents", "--wires", "gemini"}, `unknown --wires value "gemini" (have: anthropic, openai)`},
		{[]string{"subagents", "--fanout-latency", "0s"}, "--fanout-latency positive"},
		{[]string{"orchestration", "--orch-vias", "memory,redis"}, `unknown --orch-vias value "redis"`},
		{[]string{"orchestration", "--orch-vias", "postgres"}, "via postgres needs --postgres URL (or $DEPUTY_BENCH_POSTGRES_URL)"},
		{[]string{"orchestration", "--orch-figures", ""}, "--orch-figures is empty"},
		{[]string{"orchestration", "--orch-dag", "6,x"}, `--orch-dag: "x" is not a number of tasks`},
		{[]string{"orchestration", "--orch-dag", "6,4"}, "level 2's 4 tasks do not divide level 1's 6"},
		{[]string{"orchestration", "--orch-dag", "6,0"}, "level 2 has 0 tasks"},
		{[]string{"orchestration", "--orch-parallel", "0"}, "--orch-parallel must be at least 1"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			if strings.Contains(c.want, benchPostgresEnv) && os.Getenv(benchPostgresEnv) != "" {
				t.Skip("$" + benchPostgresEnv + " is set here")
			}
			var out, errOut bytes.Buffer
			code := run(c.args, &out, &errOut)
			if code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), c.want) ||
				strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out.String(), errOut.String(), c.want)
			}
		})
	}
}

// TestPostgresURLNotInErrors: a refused run with a Postgres URL holding a
// password does not print it.
func TestPostgresURLNotInErrors(t *testing.T) {
	t.Parallel()
	secret := "s3cret-pw-4242"
	var out, errOut bytes.Buffer
	code := run([]string{"orchestration", "--postgres", "postgres://bench:" + secret + "@127.0.0.1:1/x", "--orch-dag", "6,4"}, &out, &errOut)
	if code != exitUsage || strings.Contains(errOut.String(), secret) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestFakeLLMEndsWithItsStdin: the loop's child server stops when its
// parent closes its stdin, or dies, so none is left behind.
func TestFakeLLMEndsWithItsStdin(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(bin, "fakellm", "--turns", "3")
	lifeline, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, fakeLLMBanner+"http://127.0.0.1:") {
		t.Fatalf("banner %q: %v", line, err)
	}
	if err := lifeline.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, out)
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v, stderr %q", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("the server did not stop when its stdin closed")
	}
}
