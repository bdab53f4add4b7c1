package agentdef

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/internal/yamlpos"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/tool/shell"
)

// Config is deputy.yaml: which provider:model each tier alias means, and
// what models cost.
//
//	tiers:
//	  haiku: anthropic:claude-haiku-4-5
//	  sonnet: openai:gpt-5-mini
//	prices:                      # USD per million tokens
//	  anthropic:claude-haiku-4-5: {input: 1, output: 5, cache_write: 1.25, cache_read: 0.1}
//
// A tier with no mapping means inherit: the child runs on its parent's
// model, so a definition written for Claude Code (model: sonnet) still
// runs wherever deputy is pointed.
//
// Which API an openai: model is spoken to is deputy.yaml's too (OpenAI):
//
//	openai:
//	  responses: [gpt-5, gpt-5-mini]   # the Responses API; "*" for every openai: model
type Config struct {
	Tiers     map[string]string `json:"tiers,omitempty"`
	Prices    cost.Table        `json:"prices,omitempty"`
	Isolation IsolationConfig   `json:"isolation,omitzero"`
	// Telemetry belongs to the process, not to a run: it is never written
	// into a run's recorded spec (json "-"), so a worker traces with its own
	// deputy.yaml, and an endpoint with credentials in it stays out of the
	// database.
	Telemetry TelemetryConfig `json:"-"`
	MCP       MCPConfig       `json:"mcp,omitzero"`
	Bash      BashConfig      `json:"bash,omitzero"`
	OpenAI    OpenAIConfig    `json:"openai,omitzero"`
	// Permissions are not recorded in a run's spec either (json "-"): like
	// the .claude/settings*.json files they merge with, they are read
	// where a run is started or resumed (deputy.LoadPermissions), so a
	// rule added to the files holds for every run from then on.
	Permissions PermissionsConfig `json:"-"`
}

// PermissionsConfig is deputy.yaml's permissions section, in Claude Code's
// settings syntax (package permission has the rules' forms):
//
//	permissions:
//	  allow: ["Bash(go test:*)", "Edit(/src/**)"]
//	  ask: ["Bash(git push:*)"]
//	  deny: ["Read(./.env)", "WebFetch(domain:example.com)"]
//	  defaultMode: acceptEdits
//
// As in a settings file, an allow or ask rule that does not parse is left
// out (Skipped, with file:line) and the rest loads, while a deny rule that
// does not parse fails the whole file: going on without it would allow
// what it was written to stop.
type PermissionsConfig struct {
	// File is the deputy.yaml the section was read from; Line is the line
	// of its permissions key (0: the file has none).
	File string
	Line int
	// Set holds the rules, each with its file:line as Source.
	Set permission.Set
	// Mode is defaultMode, "" when the section does not set it.
	Mode permission.Mode
	// Skipped are the allow and ask rules left out, each a
	// *permission.SettingsError.
	Skipped []error
}

// OpenAIConfig is deputy.yaml's openai section: which openai: models speak
// OpenAI's Responses API (POST /v1/responses) instead of Chat Completions.
//
//	openai:
//	  responses: [gpt-5, o4-mini]
type OpenAIConfig struct {
	// Responses lists models by their own name (gpt-5, not openai:gpt-5),
	// or "*" for all. Such a model runs as openai-responses:MODEL would,
	// while its spec stays openai:MODEL: tiers, prices and records keep
	// the name the user wrote, and switching a model over is one line
	// here rather than an edit of every tier and definition naming it.
	// The spec openai-responses:MODEL needs no entry.
	Responses []string `json:"responses,omitempty"`
}

// BashConfig is deputy.yaml's bash section: what programs the bash tool
// runs may take from deputy's environment, fenced or not.
//
//	bash:
//	  env: [SSH_AUTH_SOCK, NPM_CONFIG_REGISTRY]
type BashConfig struct {
	// Env names variables of deputy's environment that commands get
	// beyond the allowlisted ones (shell.AllowEnv), as they are, URL
	// credentials included; a sandboxed command gets them too
	// (sandbox.Policy.Env). Only names: what a command prints reaches the
	// provider, the transcript and the database, so passing a variable
	// is the operator's decision. deputy's own (shell.OwnEnv: ANTHROPIC_*,
	// OPENAI_*, DEPUTY_*, OTEL_*) are refused here, since shell would
	// drop them anyway and a grant that silently does nothing misleads.
	Env []string `json:"env,omitempty"`
}

// MCPConfig is deputy.yaml's mcp section: what definitions' MCP servers
// may take from deputy's environment.
//
//	mcp:
//	  env: [GITHUB_TOKEN, SENTRY_URL]
type MCPConfig struct {
	// Env names the variables of deputy's environment that a definition's
	// mcpServers may reference as ${VAR}, beyond the harmless ones every
	// stdio server gets (PATH, HOME, ...). Any other reference refuses to
	// start the server: definitions come from files and the API, and a
	// reference is read in deputy's process, where the provider keys are,
	// so reading one is the operator's decision, not a definition's.
	Env []string `json:"env,omitempty"`
}

// TelemetryConfig is deputy.yaml's telemetry section: OpenTelemetry traces
// (package telemetry). The OTEL_EXPORTER_OTLP_* variables, when set, win
// over it.
//
//	telemetry:
//	  enabled: true                    # implied by endpoint
//	  endpoint: http://localhost:4318  # OTLP/HTTP; /v1/traces is added
//	  content: false                   # prompts, tool arguments and results
type TelemetryConfig struct {
	Enabled  bool   `json:"enabled,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Content records message content (prompts, answers, tool arguments
	// and results) in spans; off by default, since they may hold secrets.
	Content bool `json:"content,omitempty"`
}

// IsolationConfig is deputy.yaml's isolation section: how fenced children
// are fenced on this machine.
type IsolationConfig struct {
	// RootFS is the root filesystem directory a container child runs
	// over (one made with debootstrap, say); without it, container types
	// are refused.
	RootFS string `json:"rootfs,omitempty"`
	// AllowUnsandboxed lets a sandbox type run without its sandbox where
	// bubblewrap cannot run; its relay says so. Off: it is refused.
	AllowUnsandboxed bool `json:"allow_unsandboxed,omitempty"`
	// Limits of every program a fenced child runs; zero: deputy's
	// defaults.
	CPUSeconds int `json:"cpu_seconds,omitempty"`
	MemoryMB   int `json:"memory_mb,omitempty"`
	Processes  int `json:"processes,omitempty"`
	// CPUs is the CPU bandwidth of each sandbox as a whole, in CPUs (1.5:
	// one and a half cores' worth of time per second), not a count of
	// cores: a fractional share is what the CPU cgroup's quota enforces.
	CPUs float64 `json:"cpus,omitempty"`
}

// ResolveModel turns a definition's model into the provider:model to run
// on. inherit is true when the child runs on its parent's model: empty,
// inherit, a tier with no mapping, or a value that is neither a tier nor
// provider:model (Check warned about it already).
func (c *Config) ResolveModel(model string) (providerModel string, inherit bool) {
	tier, pm, ok := ParseModel(model)
	switch {
	case !ok, tier == TierInherit:
		return "", true
	case pm != "":
		return pm, false
	}
	if c != nil {
		if m, ok := c.Tiers[tier]; ok {
			return m, false
		}
	}
	return "", true
}

// LoadConfig reads deputy.yaml; a missing file is an empty config.
func LoadConfig(path string) (*Config, error) {
	data, err := readLimited(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return ParseConfig(path, data)
}

// ParseConfig parses and validates deputy.yaml. Every problem is reported
// (joined), each as file:line: msg.
func ParseConfig(file string, data []byte) (*Config, error) {
	c := &Config{}
	var errs []error
	bad := func(n ast.Node, format string, args ...any) {
		errs = append(errs, Issue{File: file, Line: yamlpos.Of(n).Line, Msg: fmt.Sprintf(format, args...)})
	}
	f, err := yamlpos.Parse(data, nil)
	if err != nil {
		pos, msg := yamlpos.OfError(err)
		return nil, Issue{File: file, Line: pos.Line, Msg: "not valid YAML: " + msg}
	}
	if n := yamlpos.CountAliases(f); n > 0 {
		return nil, Issue{File: file, Msg: "YAML aliases are not supported in deputy.yaml"}
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return c, nil
	}
	if len(f.Docs) > 1 {
		bad(f.Docs[1].Body, "only one YAML document is allowed")
	}
	top, ok := yamlpos.Pairs(f.Docs[0].Body)
	if !ok {
		bad(f.Docs[0].Body, "want a mapping with tiers and prices")
		return nil, errors.Join(errs...)
	}
	for _, kv := range top {
		switch key := yamlpos.Key(kv); key {
		case "tiers":
			parseTiers(kv.Value, c, bad)
		case "prices":
			parsePrices(kv.Value, c, bad)
		case "isolation":
			parseIsolation(kv.Value, &c.Isolation, bad)
		case "telemetry":
			parseTelemetry(kv.Value, &c.Telemetry, bad)
		case "mcp":
			parseMCP(kv.Value, &c.MCP, bad)
		case "bash":
			parseBash(kv.Value, &c.Bash, bad)
		case "openai":
			parseOpenAI(kv.Value, &c.OpenAI, bad)
		case "permissions":
			parsePermissions(file, kv, &c.Permissions, bad)
		default:
			bad(kv, "unknown key %q (tiers, prices, isolation, telemetry, mcp, bash, openai, permissions)", key)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// badFunc reports a problem at a node; ParseConfig collects them all.
type badFunc func(n ast.Node, format string, args ...any)

// parseTiers reads deputy.yaml's tiers into c.
func parseTiers(n ast.Node, c *Config, bad badFunc) {
	pairs, ok := yamlpos.Pairs(n)
	if !ok {
		bad(n, "tiers: want a mapping of tier to provider:model")
		return
	}
	c.Tiers = map[string]string{}
	for _, t := range pairs {
		tier := yamlpos.Key(t)
		v, ok := stringNode(t.Value)
		switch {
		case tier != TierHaiku && tier != TierSonnet && tier != TierOpus:
			bad(t, "tiers: %q is not a tier (haiku, sonnet, opus; inherit cannot be mapped)", tier)
		case !ok:
			bad(t.Value, "tiers.%s: want provider:model", tier)
		default:
			if _, pm, ok := ParseModel(v); !ok || pm == "" {
				bad(t.Value, "tiers.%s: %q is not provider:model", tier, v)
			} else if _, dup := c.Tiers[tier]; dup {
				bad(t, "tiers.%s: given twice", tier)
			} else {
				c.Tiers[tier] = v
			}
		}
	}
}

// parsePrices reads deputy.yaml's prices into c.
func parsePrices(n ast.Node, c *Config, bad badFunc) {
	pairs, ok := yamlpos.Pairs(n)
	if !ok {
		bad(n, "prices: want a mapping of model to prices")
		return
	}
	c.Prices = cost.Table{}
	for _, m := range pairs {
		model := strings.TrimSpace(yamlpos.Key(m))
		if model == "" {
			bad(m, "prices: empty model name")
			continue
		}
		if _, dup := c.Prices[model]; dup {
			bad(m, "prices.%s: given twice", model)
			continue
		}
		fields, ok := yamlpos.Pairs(m.Value)
		if !ok {
			bad(m.Value, "prices.%s: want input, output, cache_write, cache_write_1h, cache_read", model)
			continue
		}
		var p cost.Price
		for _, fv := range fields {
			name := yamlpos.Key(fv)
			x, err := numberNode(fv.Value)
			if err == nil && (x < 0 || math.IsInf(x, 0) || math.IsNaN(x)) {
				err = fmt.Errorf("%v is not a price", x)
			}
			if err != nil {
				bad(fv.Value, "prices.%s.%s: %v", model, name, err)
				continue
			}
			switch name {
			case "input":
				p.Input = x
			case "output":
				p.Output = x
			case "cache_write":
				p.CacheWrite = x
			case "cache_read":
				p.CacheRead = x
			case "cache_write_1h":
				p.CacheWrite1h = x
			default:
				bad(fv, "prices.%s: unknown field %q (input, output, cache_write, cache_write_1h, cache_read)", model, name)
			}
		}
		c.Prices[model] = p
	}
}

// section reads one of deputy.yaml's sections, a mapping of the fields
// listed in fields: field gets each entry and says whether it knows the
// key. A value that is not a mapping and an unknown key are reported with
// the section's fields, so every section says them the same way.
func section(n ast.Node, name, fields string, bad badFunc, field func(key string, kv *ast.MappingValueNode) (known bool)) {
	pairs, ok := yamlpos.Pairs(n)
	if !ok {
		bad(n, "%s: want a mapping (%s)", name, fields)
		return
	}
	for _, kv := range pairs {
		if key := yamlpos.Key(kv); !field(key, kv) {
			bad(kv, "%s: unknown field %q (%s)", name, key, fields)
		}
	}
}

// parseIsolation reads deputy.yaml's isolation section into c.
func parseIsolation(n ast.Node, c *IsolationConfig, bad badFunc) {
	section(n, "isolation", "rootfs, allow_unsandboxed, cpu_seconds, memory_mb, processes, cpus", bad, func(name string, kv *ast.MappingValueNode) bool {
		switch name {
		case "rootfs":
			v, ok := stringNode(kv.Value)
			if !ok || strings.TrimSpace(v) == "" {
				bad(kv.Value, "isolation.rootfs: want a directory")
				break
			}
			c.RootFS = v
		case "allow_unsandboxed":
			b, ok := kv.Value.(*ast.BoolNode)
			if !ok {
				bad(kv.Value, "isolation.allow_unsandboxed: want true or false")
				break
			}
			c.AllowUnsandboxed = b.Value
		case "cpu_seconds", "memory_mb", "processes":
			x, err := numberNode(kv.Value)
			if err == nil && (x < 1 || x != math.Trunc(x) || x > 1<<31) {
				err = fmt.Errorf("%v is not a positive whole number", x)
			}
			if err != nil {
				bad(kv.Value, "isolation.%s: %v", name, err)
				break
			}
			*map[string]*int{"cpu_seconds": &c.CPUSeconds, "memory_mb": &c.MemoryMB, "processes": &c.Processes}[name] = int(x)
		case "cpus":
			// A fraction is fine (the quota is time per 100 ms period), but
			// below 0.01 (1 ms, the kernel's smallest quota) it would be
			// clamped up silently; refused instead. More than the host has
			// is allowed (a deputy.yaml may travel) and merely never
			// throttles.
			x, err := numberNode(kv.Value)
			if err == nil && (math.IsNaN(x) || x < 0.01 || x > 4096) {
				err = fmt.Errorf("%v is not a number of CPUs (from 0.01 to 4096)", x)
			}
			if err != nil {
				bad(kv.Value, "isolation.cpus: %v", err)
				break
			}
			c.CPUs = x
		default:
			return false
		}
		return true
	})
}

// parseTelemetry reads deputy.yaml's telemetry section into c. An endpoint
// turns telemetry on unless enabled: false says otherwise. The endpoint is
// never echoed in an error: it may carry credentials.
func parseTelemetry(n ast.Node, c *TelemetryConfig, bad badFunc) {
	enabledSet := false
	section(n, "telemetry", "enabled, endpoint, content", bad, func(name string, kv *ast.MappingValueNode) bool {
		switch name {
		case "enabled", "content":
			b, ok := kv.Value.(*ast.BoolNode)
			if !ok {
				bad(kv.Value, "telemetry.%s: want true or false", name)
				break
			}
			if name == "enabled" {
				c.Enabled, enabledSet = b.Value, true
			} else {
				c.Content = b.Value
			}
		case "endpoint":
			v, ok := stringNode(kv.Value)
			if !ok || !httpURL(v) {
				bad(kv.Value, "telemetry.endpoint: want an http or https URL of an OTLP/HTTP collector, such as http://localhost:4318")
				break
			}
			c.Endpoint = strings.TrimSpace(v)
		default:
			return false
		}
		return true
	})
	if c.Endpoint != "" && !enabledSet {
		c.Enabled = true
	}
}

// parseMCP reads deputy.yaml's mcp section into c.
func parseMCP(n ast.Node, c *MCPConfig, bad badFunc) {
	envList(n, "mcp", "GITHUB_TOKEN", bad, func(_ ast.Node, name string) {
		c.Env = append(c.Env, name)
	})
}

// parseBash reads deputy.yaml's bash section into c.
func parseBash(n ast.Node, c *BashConfig, bad badFunc) {
	envList(n, "bash", "SSH_AUTH_SOCK", bad, func(v ast.Node, name string) {
		switch {
		case shell.OwnEnv(name):
			bad(v, "bash.env: %s is deputy's own (ANTHROPIC_*, OPENAI_*, DEPUTY_*, OTEL_*): no program gets it", name)
		case slices.Contains(c.Env, name): // harmless; once is enough
		default:
			c.Env = append(c.Env, name)
		}
	})
}

// parseOpenAI reads deputy.yaml's openai section into c.
func parseOpenAI(n ast.Node, c *OpenAIConfig, bad badFunc) {
	section(n, "openai", "responses", bad, func(key string, kv *ast.MappingValueNode) bool {
		if key != "responses" {
			return false
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok {
			bad(kv.Value, "openai.responses: want a list of model names, such as [gpt-5]")
			return true
		}
		for _, v := range seq.Values {
			s, ok := stringNode(v)
			s = strings.TrimSpace(s)
			switch {
			case !ok || s == "" || strings.ContainsAny(s, " \t"):
				bad(v, "openai.responses: want a model name, such as gpt-5, or \"*\" for every openai: model")
			case strings.Contains(s, ":") && !strings.HasPrefix(s, "ft:"):
				bad(v, "openai.responses: %q: name the model without its provider (gpt-5, not openai:gpt-5); openai-responses:MODEL needs no entry", s)
			case slices.Contains(c.Responses, s):
				bad(v, "openai.responses: %s is listed twice", s)
			default:
				c.Responses = append(c.Responses, s)
			}
		}
		return true
	})
}

// parsePermissions reads deputy.yaml's permissions section (kv) into c.
func parsePermissions(file string, kv *ast.MappingValueNode, c *PermissionsConfig, bad badFunc) {
	c.File, c.Line = file, yamlpos.Of(kv).Line
	var allow, ask, deny []permission.Rule
	section(kv.Value, "permissions", "allow, ask, deny, defaultMode", bad, func(key string, f *ast.MappingValueNode) bool {
		var list *[]permission.Rule
		switch key {
		case "allow":
			list = &allow
		case "ask":
			list = &ask
		case "deny":
			list = &deny
		case "defaultMode":
			v, ok := stringNode(f.Value)
			m, err := permission.ParseMode(v)
			switch {
			case !ok:
				bad(f.Value, "permissions.defaultMode: want a mode (default, acceptEdits, plan, dontAsk, bypassPermissions)")
			case err != nil:
				bad(f.Value, "permissions.defaultMode: %v", err)
			default:
				c.Mode = m
			}
			return true
		default:
			return false
		}
		seq, ok := f.Value.(*ast.SequenceNode)
		if !ok {
			if key == "deny" {
				bad(f.Value, "permissions.deny: want a list of rules (a deny list that cannot be read fails the load)")
			} else {
				bad(f.Value, "permissions.%s: want a list of rules", key)
			}
			return true
		}
		for _, v := range seq.Values {
			line := yamlpos.Of(v).Line
			text, ok := stringNode(v)
			var r permission.Rule
			err := fmt.Errorf("rule %s is not a string", cutForMsg(strings.TrimSpace(v.String())))
			if ok {
				r, err = permission.ParseRule(text)
			}
			switch {
			case err != nil && key == "deny":
				bad(v, "permissions.deny: %v (a deny rule that cannot be read fails the load)", err)
			case err != nil:
				c.Skipped = append(c.Skipped, &permission.SettingsError{File: file, Line: line, Err: err})
			default:
				r.Source = fmt.Sprintf("%s:%d", file, line)
				*list = append(*list, r)
			}
		}
		return true
	})
	c.Set = permission.NewSet(allow, ask, deny)
}

// envList reads the env field of section (mcp, bash): a list of variable
// names of deputy's environment, example being one such. add gets each
// well-formed name with its node; what a name may be beyond that is the
// section's to say.
func envList(n ast.Node, name, example string, bad badFunc, add func(v ast.Node, name string)) {
	section(n, name, "env", bad, func(key string, kv *ast.MappingValueNode) bool {
		if key != "env" {
			return false
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok {
			bad(kv.Value, "%s.env: want a list of variable names", name)
			return true
		}
		for _, v := range seq.Values {
			s, ok := stringNode(v)
			if !ok || !envName.MatchString(s) {
				bad(v, "%s.env: want a variable name, such as %s", name, example)
				continue
			}
			add(v, s)
		}
		return true
	})
}

// httpURL reports whether s is an absolute http(s) URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(strings.TrimSpace(s))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func stringNode(n ast.Node) (string, bool) {
	if s, ok := n.(*ast.StringNode); ok {
		return s.Value, true
	}
	return "", false
}

func numberNode(n ast.Node) (float64, error) {
	switch x := n.(type) {
	case *ast.IntegerNode:
		switch v := x.Value.(type) {
		case int64:
			return float64(v), nil
		case uint64:
			return float64(v), nil
		}
	case *ast.FloatNode:
		return x.Value, nil
	}
	var v any
	if n != nil {
		_ = yaml.NodeToValue(n, &v)
	}
	return 0, fmt.Errorf("want a number, got %v", v)
}
