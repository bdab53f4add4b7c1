// Package setup is what the CLI and the library both do to run instances
// on a workspace: open models by spec (the offline fake included), load
// the catalog, skills and deputy.yaml, build a workspace's tools, and hold
// the one-engine-per-database lock.
package setup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
	"github.com/deputy-run/deputy/tool/shell"
)

// ErrScenarioNotFake is returned when a scenario is given for a model
// that is not the fake one.
var ErrScenarioNotFake = errors.New("a scenario applies only to the fake model")

// Models opens the models of one process: the root's, and any other a
// definition or a tier names for a child. Fake specs ("fake",
// "fake:NAME") all play the same scenario, so a scripted parent and its
// scripted children are one story. The zero value plays the built-in
// demo.
type Models struct {
	// Scenario is the fake model's script: a file, "demo", or "" (the demo).
	Scenario string
	// Script, when set, is the fake model's script, already parsed.
	Script *fake.Scenario
	// NoLatency turns the fake's simulated latency off (scripts and tests
	// that want speed, not realism; also $DEPUTY_FAKE_LATENCY=off).
	NoLatency bool

	mu     sync.Mutex // children open models concurrently
	opened map[string]opened
}

type opened struct {
	model llm.Model
	name  string
}

// IsFake reports whether spec names the built-in scripted model.
func IsFake(spec string) bool { return spec == "fake" || strings.HasPrefix(spec, "fake:") }

// Open returns the model a spec names and the model name its requests
// carry: the provider's own name (claude-sonnet-4-5, not
// anthropic:claude-sonnet-4-5). One client per spec, so one connection pool.
func (ms *Models) Open(spec string) (llm.Model, string, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if o, ok := ms.opened[spec]; ok {
		return o.model, o.name, nil
	}
	m, name, err := ms.open(spec)
	if err != nil {
		return nil, "", err
	}
	if ms.opened == nil {
		ms.opened = map[string]opened{}
	}
	ms.opened[spec] = opened{m, name}
	return m, name, nil
}

func (ms *Models) open(spec string) (llm.Model, string, error) {
	if spec == agent.PlannerModel {
		return agent.Planner{}, spec, nil // a program's fan-out root, whoever resumes it
	}
	if IsFake(spec) {
		if ms.Script == nil {
			s, err := LoadScenario(ms.Scenario)
			if err != nil {
				return nil, "", err
			}
			ms.Script = s
		}
		var opts []fake.ModelOption
		if ms.NoLatency || os.Getenv("DEPUTY_FAKE_LATENCY") == "off" {
			opts = append(opts, fake.WithoutLatency())
		}
		return fake.NewModel(ms.Script, opts...), spec, nil
	}
	if ms.Scenario != "" || ms.Script != nil {
		return nil, "", ErrScenarioNotFake
	}
	_, name, err := provider.Parse(spec)
	if err != nil {
		return nil, "", err
	}
	m, err := provider.New(spec, provider.Options{})
	if err != nil {
		return nil, "", err
	}
	return m, name, nil
}

// LoadScenario reads a scenario file; "demo" and "" name the built-in demo.
func LoadScenario(path string) (*fake.Scenario, error) {
	if path == "" || path == "demo" {
		return fake.DemoScenario(), nil
	}
	return fake.LoadScenario(path)
}

// Runner loads what a workspace's subagents need: the catalog (built-ins,
// ~/.deputy/agents, the workspace's .deputy/agents and .claude/agents,
// then defs, the program's own, at the project's level and winning over
// its files), skills, and cfg. A bad definition or skill file is returned
// as a problem naming it (it never stops the run); an invalid one of defs
// is an error, since the program can fix it.
//
// A workspace whose fence.UntrustedFile exists is refused with a
// *fence.UntrustedError naming the files: a fenced child's tripwire fired
// there, and its definitions, skills and deputy.yaml are not loaded until
// the user has reviewed them and removed the file. Every start (run,
// worker, serve, deputy.Open) loads through here.
func Runner(ws string, cfg *agentdef.Config, ms *Models, defs []*agentdef.Definition) (*agent.Runner, []agentdef.Issue, error) {
	if err := fence.CheckTrusted(ws); err != nil {
		return nil, nil, err
	}
	home, _ := os.UserHomeDir()
	lo := agentdef.LoadOptions{ProjectDir: ws}
	skillDirs := agentdef.ProjectSkillDirs(ws)
	if home != "" {
		lo.UserDir = filepath.Join(home, ".deputy", "agents")
		skillDirs = append(skillDirs, filepath.Join(home, ".deputy", "skills"))
	}
	cat, loaded := agentdef.Load(lo)
	cat, bad := cat.Merge(agentdef.LevelProject, defs)
	if len(bad) > 0 {
		return nil, nil, errors.Join(bad...)
	}
	issues, _ := loaded.Issues()
	skills, serrs, _ := agentdef.LoadSkills(skillDirs...)
	// MaxDepth and MaxParallel come with each run's spec (durable.Spec).
	return &agent.Runner{
		Catalog: cat,
		Skills:  skills,
		Config:  cfg,
		Models: func(spec string) (llm.Model, error) {
			m, _, err := ms.Open(spec)
			return m, err
		},
	}, append(issues, serrs...), nil
}

// DemoConfig is the configuration of the offline demo when no deputy.yaml
// exists: the haiku tier on a second scripted model, and illustrative
// prices so the cost table has figures (the rates of Claude Sonnet 4.5 and
// Haiku 4.5 as Anthropic lists them per million tokens; a scripted model
// costs nothing, and the table says the prices are illustrative).
func DemoConfig() *agentdef.Config {
	return &agentdef.Config{
		Tiers: map[string]string{agentdef.TierHaiku: "fake:haiku"},
		Prices: cost.Table{
			"fake":       {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30},
			"fake:haiku": {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10},
		},
	}
}

// LoadConfig reads path, or, when it is empty, the first deputy.yaml found
// in the workspace and then ~/.deputy. With none and a fake root model,
// the demo's configuration applies; with none otherwise, an empty one.
//
// A zero-length deputy.yaml in the workspace counts as none: it is what a
// fenced child's sandbox mounts read-only where the workspace has no
// deputy.yaml (sandbox.Policy.Protect), for as long as the box is open or
// until a crashed deputy's leftovers are swept, and it must not shadow
// ~/.deputy/deputy.yaml for a deputy started there meanwhile. Nothing is
// lost: an empty file configures nothing. (To override ~/.deputy's with
// an empty configuration, write "{}".) A path given explicitly is read
// whatever its size.
func LoadConfig(ws, path, rootSpec string) (*agentdef.Config, error) {
	paths := []string{path}
	if path == "" {
		paths = []string{filepath.Join(ws, "deputy.yaml")}
		if home, _ := os.UserHomeDir(); home != "" {
			paths = append(paths, filepath.Join(home, ".deputy", "deputy.yaml"))
		}
	}
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if path != "" {
				return nil, fmt.Errorf("config %s: %w", p, err)
			}
			continue
		}
		if path == "" && i == 0 && st.Mode().IsRegular() && st.Size() == 0 {
			continue // a sandbox's placeholder, or as good as absent
		}
		return agentdef.LoadConfig(p)
	}
	if IsFake(rootSpec) {
		return DemoConfig(), nil
	}
	return &agentdef.Config{}, nil
}

// Tools returns the durable engine's Options.Tools: a root's workspace's
// built-in tools, and extra.
func Tools(extra ...tool.Tool) func(durable.Spec) (*tool.Set, error) {
	return func(s durable.Spec) (*tool.Set, error) {
		if st, err := os.Stat(s.Workspace); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", s.Workspace)
		}
		return builtinSet(builtin.Config{Workspace: s.Workspace, SearchURL: s.SearchURL, BashPassEnv: bashEnv(s)}, extra)
	}
}

// bashEnv is what the run's deputy.yaml grants programs beyond the
// allowlist (bash.env), recorded with the run so a worker resuming it
// grants the same.
func bashEnv(s durable.Spec) []string {
	if s.Config == nil {
		return nil
	}
	return s.Config.Bash.Env
}

func builtinSet(cfg builtin.Config, extra []tool.Tool) (*tool.Set, error) {
	tools, err := builtin.Tools(cfg)
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return tool.NewSet(append(tools, extra...)...)
}

// Fence returns the durable engine's Options.Fence: fenced children of a
// root work in a worktree of its workspace and/or a sandbox, with the
// built-in tools rebuilt there. A program's own tools are not fenced: they
// keep running in the program.
func Fence() func(durable.Spec) agent.Fencer {
	return func(s durable.Spec) agent.Fencer {
		var iso agentdef.IsolationConfig
		if s.Config != nil {
			iso = s.Config.Isolation
		}
		// A granted variable must pass both filters a fenced command's
		// environment goes through: bash's allowlist and the sandbox's.
		env := bashEnv(s)
		return &fence.Fencer{Workspace: s.Workspace, Config: iso, Env: env,
			Tools: func(dir string, sb shell.Sandbox) (*tool.Set, error) {
				// The file tools run in deputy's process, outside the
				// sandbox: they must hide what it hides from programs.
				return builtinSet(builtin.Config{Workspace: dir, SearchURL: s.SearchURL, Sandbox: sb,
					ReadOnly: fence.Protected, Hidden: fence.Hidden, BashPassEnv: env}, nil)
			}}
	}
}

// Recover removes what fences of a process that died left behind: the
// sandboxes' snapshots and /tmp directories, and the worktrees, in
// workspace's repository, of this database's instances that have ended
// (branches holding finished work stay, for deputy merge). It returns the ids whose
// worktrees it removed.
func Recover(ctx context.Context, st *store.Store, workspace string) ([]string, error) {
	swept := sandbox.Sweep("")
	gone, err := fence.Prune(ctx, workspace, func(id string) bool {
		// Only this database's instances that ended: a worktree of an
		// instance it does not know may be another deputy's, at work.
		in, err := st.GetInstance(ctx, id)
		return err != nil || !in.State.Terminal()
	})
	return gone, errors.Join(swept, err)
}
