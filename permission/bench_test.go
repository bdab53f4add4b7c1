package permission

import (
	"fmt"
	"testing"
	"time"
)

// benchSet is 100 rules of every kind, none of which decides the benchmark
// calls early, so Decide walks all of them.
func benchSet(b *testing.B) Set {
	var allow, ask, deny []string
	for i := range 20 {
		allow = append(allow, fmt.Sprintf("Bash(tool%d:*)", i), fmt.Sprintf("Edit(/gen%d/**)", i))
		ask = append(ask, fmt.Sprintf("Bash(deploy%d *)", i), fmt.Sprintf("mcp__srv%d__write", i))
		deny = append(deny, fmt.Sprintf("Read(./secret%d/**)", i), fmt.Sprintf("WebFetch(domain:bad%d.example)", i))
	}
	for i := range 10 {
		deny = append(deny, fmt.Sprintf("Bash(rm%d -rf *)", i))
		allow = append(allow, fmt.Sprintf("Read(~/docs%d/*.md)", i))
	}
	allow = append(allow, "Bash(git:*)", "Bash(tail:*)", "Read(/src/**)")
	s := NewSet(mustRules(b, allow...), mustRules(b, ask...), mustRules(b, deny...))
	if n := len(s.Allow) + len(s.Ask) + len(s.Deny); n < 100 {
		b.Fatalf("%d rules", n)
	}
	return s
}

func BenchmarkDecide100Rules(b *testing.B) {
	s := benchSet(b)
	for _, bc := range []struct {
		name string
		c    Call
	}{
		{"bash", call("bash", cmd("git status && git diff --stat | tail -n 5"))},
		{"read", call("read_file", file("/home/u/proj/src/pkg/a.go"))},
	} {
		if d := s.Decide(bc.c); d.Outcome != Allow {
			b.Fatalf("%s: %v", bc.name, d.Outcome)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				s.Decide(bc.c)
			}
			reportCPU(b, cpu0)
		})
		// The same rules as a Set literal, walked whole: the ratio of the
		// two, within one run, is what the index saves.
		linear := Set{Allow: s.Allow, Ask: s.Ask, Deny: s.Deny}
		b.Run(bc.name+"/linear", func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				linear.Decide(bc.c)
			}
			reportCPU(b, cpu0)
		})
	}
}

// reportCPU adds the process's CPU time per call since cpu0: on a machine
// shared with other work, wall time per call counts the time the
// benchmark waited for a CPU, and CPU time does not (it does count the
// garbage collector's work on other threads, which the calls cause).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu0 > 0 && b.N > 0 {
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
