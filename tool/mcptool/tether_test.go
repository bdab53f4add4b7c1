package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool/mcptool/mcptest"
	"github.com/deputy-run/deputy/tool/shell/tether"
)

// A stdio server's environment is its definition's, nothing of deputy's:
// provider keys, deputy's tokens and the telemetry exporter's headers set
// in deputy's own environment do not reach it. And it runs tethered: pid 1
// of a PID namespace of its own where the kernel allows, so that it and
// what it starts die with deputy.
func TestStdioServerEnvAndTether(t *testing.T) {
	// Not parallel: t.Setenv.
	leaks := map[string]string{
		"ANTHROPIC_API_KEY":          "sk-ant-leak1",
		"OPENAI_API_KEY":             "sk-leak2",
		"DEPUTY_API_TOKEN":           "leak3",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer leak4",
		"PATH":                       os.Getenv("PATH") + ":/leak5",
	}
	for k, v := range leaks {
		t.Setenv(k, v)
	}
	s := connect(t, stdio(t, mcptest.ModeServe, ""))
	defer s.Close()
	ts := tools(t, s)
	for name := range leaks {
		out, err := ts["mcp__calc__env"].Run(context.Background(), json.RawMessage(fmt.Sprintf(`{"name":%q}`, name)))
		if err != nil || out != name+" is not set" {
			t.Errorf("%s reached the server: %q %v", name, out, err)
		}
	}
	out, err := ts["mcp__calc__env"].Run(context.Background(), json.RawMessage(`{"name":"MCPTEST_TOKEN"}`))
	if err != nil || !strings.HasPrefix(out, "MCPTEST_TOKEN=") {
		t.Errorf("the definition's own env is missing: %q %v", out, err)
	}

	m := tether.Mode()
	if m != tether.ModePIDNamespace && m != tether.ModeUserPIDNamespace {
		if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
			t.Fatalf("no PID namespaces here (%s), though CI runs as root where they work", m)
		}
		t.Skipf("no PID namespaces here (%s)", m)
	}
	out, err = ts["mcp__calc__pid"].Run(context.Background(), json.RawMessage(`{}`))
	if err != nil || out != fmt.Sprint(s.PID()) {
		t.Errorf("the server's pid as /proc names it: %q %v, want %d", out, err, s.PID())
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), fmt.Sprintf("\nNSpid:\t%d\t1\n", s.PID())) {
		t.Errorf("not pid 1 of a namespace of its own:\n%s", status)
	}
}
