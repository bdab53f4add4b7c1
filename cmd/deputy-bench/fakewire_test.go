package main

import (
	"strings"
	"testing"
)

func TestFakeWirePrintsARatePerWireAndMode(t *testing.T) {
	t.Parallel()
	out, errOut, code := bench(t, "fakewire", "--repeats", "2", "--duration", "100ms", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fs := figures(t, out, "benchmark", "figure", "wire", "stream", "value", "min", "max", "unit", "concurrency", "seconds", "repeats")
	var got []string
	for _, f := range fs {
		got = append(got, f["wire"].(string)+map[bool]string{true: "/stream", false: "/json"}[f["stream"].(bool)])
		if v := f["value"].(float64); v <= 0 || f["min"].(float64) > v || f["max"].(float64) < v || f["unit"] != "req/s" {
			t.Errorf("figure %v", f)
		}
	}
	if strings.Join(got, " ") != "anthropic/json anthropic/stream chat/json chat/stream responses/json responses/stream" {
		t.Fatalf("figures for %v", got)
	}
}

func TestFakeWireRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--wires", "grpc"}, {"--concurrency", "0"}, {"--wires", ""}} {
		if _, errOut, code := bench(t, append([]string{"fakewire"}, args...)...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}
