package hook

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkNoopCommandHook measures what a no-op command hook (`true`)
// adds to a tool call, against the plain call in the same run: Run with
// no hook matching (what every call without hooks pays). Each run prints
// one JSON line. The goal (issue 20) is under 10 ms over the plain call.
func BenchmarkNoopCommandHook(b *testing.B) {
	dir := b.TempDir()
	cfg, err := ParseSettings("settings.json", []byte(one("PreToolUse", "Bash", "true", "")))
	if err != nil {
		b.Fatal(err)
	}
	r := &Runner{Config: cfg, ProjectDir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}}
	hooked := bashCall("go test ./...")
	plain := Input{Event: PreToolUse, Tool: "read_file", ToolInput: json.RawMessage(`{"path":"a.go"}`)}
	if o := r.Run(bg, hooked); o.Ran != 1 || len(o.Errors) > 0 {
		b.Fatalf("%+v", o)
	}
	if o := r.Run(bg, plain); o.Ran != 0 {
		b.Fatalf("%+v", o)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		r.Run(bg, hooked)
	}
	hook := time.Since(start)
	start = time.Now()
	for range b.N {
		r.Run(bg, plain)
	}
	plainT := time.Since(start)
	// The floor: the same process started and waited for by os/exec alone.
	start = time.Now()
	for range b.N {
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	bare := time.Since(start)
	b.StopTimer()
	n := float64(b.N)
	hookMS, plainMS, bareMS := float64(hook.Microseconds())/n/1000, float64(plainT.Nanoseconds())/n/1e6, float64(bare.Microseconds())/n/1000
	line, _ := marshal(map[string]any{"bench": "hook_noop_command", "n": b.N, "hook_ms": hookMS, "plain_ms": plainMS,
		"over_plain_ms": hookMS - plainMS, "bare_exec_ms": bareMS, "goal": "over_plain_ms<10"})
	fmt.Println(string(line))
	b.ReportMetric(hookMS-plainMS, "over-plain-ms")
	b.ReportMetric(plainMS*1e6, "plain-ns")
	b.ReportMetric(bareMS, "bare-exec-ms")
}
