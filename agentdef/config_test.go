package agentdef

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/cost"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	src := `tiers:
  haiku: anthropic:claude-haiku-4-5
  sonnet: openai:gpt-5-mini
prices:
  anthropic:claude-haiku-4-5: {input: 1, output: 5, cache_write: 1.25, cache_read: 0.1}
  openai:gpt-5-mini:
    input: 0.25
    output: 2
`
	c, err := ParseConfig("deputy.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tiers["haiku"] != "anthropic:claude-haiku-4-5" || c.Tiers["sonnet"] != "openai:gpt-5-mini" || len(c.Tiers) != 2 {
		t.Errorf("tiers %v", c.Tiers)
	}
	if p := c.Prices["anthropic:claude-haiku-4-5"]; p != (cost.Price{Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1}) {
		t.Errorf("price %+v", p)
	}
	if p := c.Prices["openai:gpt-5-mini"]; p != (cost.Price{Input: 0.25, Output: 2}) {
		t.Errorf("price %+v", p)
	}
	if pm, inh := c.ResolveModel("opus"); pm != "" || !inh {
		t.Errorf("unmapped tier: %q %v", pm, inh)
	}
	if pm, inh := c.ResolveModel("sonnet"); pm != "openai:gpt-5-mini" || inh {
		t.Errorf("sonnet: %q %v", pm, inh)
	}
}

func TestParseConfigErrorsHaveLines(t *testing.T) {
	t.Parallel()
	src := `tiers:
  haiku: just-a-name
  inherit: openai:x
prices:
  m:
    input: -1
    output: lots
    extra: 1
cost: 3
`
	_, err := ParseConfig("deputy.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`deputy.yaml:2: tiers.haiku: "just-a-name" is not provider:model`,
		`deputy.yaml:3: tiers: "inherit" is not a tier`,
		`deputy.yaml:6: prices.m.input: -1 is not a price`,
		`deputy.yaml:7: prices.m.output: want a number`,
		`deputy.yaml:8: prices.m: unknown field "extra"`,
		`deputy.yaml:9: unknown key "cost"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
	if _, err := ParseConfig("deputy.yaml", []byte("tiers: [a\n")); err == nil || !strings.HasPrefix(err.Error(), "deputy.yaml:") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestLoadConfigMissingIsEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := LoadConfig(filepath.Join(dir, "deputy.yaml"))
	if err != nil || len(c.Tiers) != 0 {
		t.Fatalf("%v %v", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deputy.yaml"), []byte("tiers:\n  opus: anthropic:claude-opus-4-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig(filepath.Join(dir, "deputy.yaml"))
	if err != nil || c.Tiers["opus"] != "anthropic:claude-opus-4-1" {
		t.Fatalf("%v %v", c, err)
	}
}

func TestParseConfigIsolation(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte(`isolation:
  rootfs: /srv/rootfs
  allow_unsandboxed: true
  cpu_seconds: 60
  memory_mb: 512
  processes: 64
  cpus: 1.5
`))
	if err != nil {
		t.Fatal(err)
	}
	want := IsolationConfig{RootFS: "/srv/rootfs", AllowUnsandboxed: true, CPUSeconds: 60, MemoryMB: 512, Processes: 64, CPUs: 1.5}
	if c.Isolation != want {
		t.Fatalf("isolation %+v", c.Isolation)
	}
	_, err = ParseConfig("deputy.yaml", []byte(`isolation:
  rootfs: 3
  allow_unsandboxed: maybe
  cpu_seconds: -1
  memory_mb: 1.5
  network: yes
  cpus: 0
`))
	for _, w := range []string{
		"deputy.yaml:7: isolation.cpus: 0 is not a number of CPUs (from 0.01 to 4096)",
		"deputy.yaml:2: isolation.rootfs: want a directory",
		"deputy.yaml:3: isolation.allow_unsandboxed: want true or false",
		"deputy.yaml:4: isolation.cpu_seconds: -1 is not a positive whole number",
		"deputy.yaml:5: isolation.memory_mb: 1.5 is not a positive whole number",
		`deputy.yaml:6: isolation: unknown field "network"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
}

func TestParseConfigTelemetry(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte(`telemetry:
  endpoint: http://collector:4318
  content: true
`))
	if err != nil {
		t.Fatal(err)
	}
	// An endpoint alone turns telemetry on.
	if want := (TelemetryConfig{Enabled: true, Endpoint: "http://collector:4318", Content: true}); c.Telemetry != want {
		t.Fatalf("telemetry %+v", c.Telemetry)
	}
	c, err = ParseConfig("deputy.yaml", []byte("telemetry: {enabled: false, endpoint: \"https://x:4318\"}\n"))
	if err != nil || c.Telemetry.Enabled {
		t.Fatalf("enabled: false must win over an endpoint: %+v %v", c.Telemetry, err)
	}
	// The section belongs to the process: it never travels in a run's spec.
	if b, _ := json.Marshal(c); strings.Contains(string(b), "x:4318") {
		t.Errorf("telemetry in the config's JSON: %s", b)
	}
	_, err = ParseConfig("deputy.yaml", []byte(`tiers: {}
telemetry:
  enabled: yes please
  endpoint: "grpc://user:s3cret@collector:4317"
  content: 1
  sampler: always
`))
	for _, w := range []string{
		"deputy.yaml:3: telemetry.enabled: want true or false",
		"deputy.yaml:4: telemetry.endpoint: want an http or https URL",
		"deputy.yaml:5: telemetry.content: want true or false",
		`deputy.yaml:6: telemetry: unknown field "sampler"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the endpoint's credentials are in the error: %v", err)
	}
	if _, err = ParseConfig("deputy.yaml", []byte("telemetry: true\n")); err == nil ||
		!strings.Contains(err.Error(), "deputy.yaml:1: telemetry: want a mapping") {
		t.Errorf("scalar section: %v", err)
	}
}

func TestParseConfigMCP(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte("mcp:\n  env: [GITHUB_TOKEN, SENTRY_URL]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.MCP.Env, []string{"GITHUB_TOKEN", "SENTRY_URL"}) {
		t.Fatalf("mcp %+v", c.MCP)
	}
	_, err = ParseConfig("deputy.yaml", []byte("mcp:\n  env: [GOOD, 'not a name']\n  servers: {}\n"))
	for _, w := range []string{
		"deputy.yaml:2: mcp.env: want a variable name",
		`deputy.yaml:3: mcp: unknown field "servers"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
	if _, err = ParseConfig("deputy.yaml", []byte("mcp:\n  env: GITHUB_TOKEN\n")); err == nil ||
		!strings.Contains(err.Error(), "deputy.yaml:2: mcp.env: want a list of variable names") {
		t.Errorf("scalar env: %v", err)
	}
}

// bash.env grants programs variables by name; deputy's own are refused at
// their line, since the bash tool never passes them and a grant that does
// nothing would mislead.
func TestParseConfigBashEnv(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte("bash:\n  env: [SSH_AUTH_SOCK, NPM_CONFIG_REGISTRY, SSH_AUTH_SOCK]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Bash.Env, []string{"SSH_AUTH_SOCK", "NPM_CONFIG_REGISTRY"}) {
		t.Fatalf("bash %+v", c.Bash)
	}
	// Recorded in a run's spec, so a worker resuming it grants the same.
	b, _ := json.Marshal(c)
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.Bash.Env, c.Bash.Env) {
		t.Fatalf("round trip %s: %+v %v", b, back.Bash, err)
	}
	_, err = ParseConfig("deputy.yaml", []byte(`bash:
  env:
    - GOOD
    - ANTHROPIC_API_KEY
    - 'not a name'
    - otel_exporter_otlp_headers
    - DEPUTY_DB
    - OPENAI_BASE_URL
  timeout: 3
`))
	for _, w := range []string{
		"deputy.yaml:4: bash.env: ANTHROPIC_API_KEY is deputy's own",
		"deputy.yaml:5: bash.env: want a variable name",
		"deputy.yaml:6: bash.env: otel_exporter_otlp_headers is deputy's own",
		"deputy.yaml:7: bash.env: DEPUTY_DB is deputy's own",
		"deputy.yaml:8: bash.env: OPENAI_BASE_URL is deputy's own",
		`deputy.yaml:9: bash: unknown field "timeout"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "GOOD") {
		t.Errorf("a good name refused: %v", err)
	}
	for _, src := range []string{"bash:\n  env: SSH_AUTH_SOCK\n", "bash: [env]\n"} {
		if _, err := ParseConfig("deputy.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "deputy.yaml:") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// openai.responses moves openai: models onto the Responses API by their
// own names; what is not a bare model name is refused at its line.
func TestParseConfigOpenAIResponses(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte("openai:\n  responses: [gpt-5, o4-mini, \"ft:gpt-4.1:acme::x1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.OpenAI.Responses, []string{"gpt-5", "o4-mini", "ft:gpt-4.1:acme::x1"}) {
		t.Fatalf("openai %+v", c.OpenAI)
	}
	// Recorded in a run's spec, so a worker resuming it speaks the same wire.
	b, _ := json.Marshal(c)
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.OpenAI.Responses, c.OpenAI.Responses) {
		t.Fatalf("round trip %s: %+v %v", b, back.OpenAI, err)
	}
	if c, err := ParseConfig("deputy.yaml", []byte("openai:\n  responses: [\"*\"]\n")); err != nil || !slices.Equal(c.OpenAI.Responses, []string{"*"}) {
		t.Errorf("every model: %+v %v", c, err)
	}
	_, err = ParseConfig("deputy.yaml", []byte(`openai:
  responses:
    - gpt-5
    - openai:gpt-5-mini
    - ''
    - gpt-5
    - {name: o3}
  chat: [gpt-4.1]
`))
	for _, w := range []string{
		`deputy.yaml:4: openai.responses: "openai:gpt-5-mini": name the model without its provider`,
		"deputy.yaml:5: openai.responses: want a model name",
		"deputy.yaml:6: openai.responses: gpt-5 is listed twice",
		"deputy.yaml:7: openai.responses: want a model name",
		`deputy.yaml:8: openai: unknown field "chat" (responses)`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
	for _, src := range []string{"openai:\n  responses: gpt-5\n", "openai: [responses]\n"} {
		if _, err := ParseConfig("deputy.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "deputy.yaml:") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// A model name with a colon must be quoted in YAML; the quotes are the
// syntax's, not the name's.
func TestParseConfigQuotedPriceKeys(t *testing.T) {
	t.Parallel()
	src := "prices:\n  \"openai:gpt-9\": {input: 1, output: 2}\n  'anthropic:claude-x': {input: 3, output: 4}\ntiers:\n  \"haiku\": openai:gpt-9\n"
	c, err := ParseConfig("deputy.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Prices["openai:gpt-9"]; !ok || p.Input != 1 || p.Output != 2 {
		t.Errorf("openai:gpt-9: %+v %v (prices %v)", p, ok, c.Prices)
	}
	if p, ok := c.Prices["anthropic:claude-x"]; !ok || p.Input != 3 {
		t.Errorf("anthropic:claude-x: %+v %v (prices %v)", p, ok, c.Prices)
	}
	if c.Tiers["haiku"] != "openai:gpt-9" {
		t.Errorf("tiers %v", c.Tiers)
	}
}

// deputy.yaml prices Anthropic's one-hour cache writes apart.
func TestParseConfigOneHourCacheWrites(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig("deputy.yaml", []byte("prices:\n  claude-x: {input: 3, output: 15, cache_write: 3.75, cache_write_1h: 6, cache_read: 0.3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Prices["claude-x"]; p.CacheWrite1h != 6 || p.CacheWrite != 3.75 {
		t.Errorf("price %+v", p)
	}
}
