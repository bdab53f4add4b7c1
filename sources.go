package deputy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/fence"
)

// Sources name the directories Open reads subagent definitions (*.md,
// Claude Code's format) and skills (NAME/SKILL.md) from. The zero value
// reads none: the catalog is then the built-in types, the database's
// definitions table and Options.Definitions.
type Sources struct {
	// Project is a project's root: its .deputy/agents and .claude/agents
	// definitions and its .deputy/skills and .claude/skills skills, at
	// the project level (over the user's and the database's).
	Project string
	// User is a user's deputy directory (UserDir: ~/.deputy): its agents/
	// definitions and skills/ skills, at the user level.
	User string
}

// UserDir is ~/.deputy, the user's deputy directory: where the CLI finds
// the user's definitions, skills and deputy.yaml (Sources.User,
// FindConfig) and keeps this machine's executor id.
func UserDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the user's deputy directory: %w", err)
	}
	return filepath.Join(home, ".deputy"), nil
}

// loadCatalog is what a runtime's subagents draw on: the types (built-ins,
// then src's files, then defs at the project level, winning over files)
// and the skills. A bad definition or skill file is returned as a problem
// naming it (it never stops the runtime); an invalid one of defs is an
// error, since the program can fix it.
func loadCatalog(src Sources, defs []*Definition) (*agentdef.Catalog, map[string]*agentdef.Skill, []agentdef.Issue, error) {
	lo := agentdef.LoadOptions{ProjectDir: src.Project}
	var skillDirs []string
	if src.Project != "" {
		skillDirs = agentdef.ProjectSkillDirs(src.Project)
	}
	if src.User != "" {
		lo.UserDir = filepath.Join(src.User, "agents")
		skillDirs = append(skillDirs, filepath.Join(src.User, "skills"))
	}
	cat, loaded := agentdef.Load(lo)
	cat, bad := cat.Merge(agentdef.LevelProject, defs)
	if len(bad) > 0 {
		return nil, nil, nil, errors.Join(bad...)
	}
	issues, _ := loaded.Issues()
	skills, serrs, _ := agentdef.LoadSkills(skillDirs...)
	return cat, skills, append(issues, serrs...), nil
}

// checkTrusted refuses a workspace (and a project whose definitions would
// be read) where a fenced child's tripwire fired: fence.UntrustedFile
// names the files it found changed, and nothing there is trusted until
// the user has reviewed them and removed it (*fence.UntrustedError).
func checkTrusted(dirs ...string) error {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if err := fence.CheckTrusted(d); err != nil {
			return err
		}
	}
	return nil
}

// LoadConfig reads a deputy.yaml (tiers, prices, isolation, bash, mcp,
// telemetry); a file that does not parse is an error naming file:line.
func LoadConfig(path string) (*Config, error) { return agentdef.LoadConfig(path) }

// FindConfig reads the first deputy.yaml found in dirs, in order (the CLI:
// the workspace, then UserDir; an empty dir is skipped); none found is
// (nil, nil).
//
// A zero-length deputy.yaml counts as none: it is what a fenced child's
// sandbox mounts read-only where the workspace has no deputy.yaml
// (sandbox.Policy.Protect), for as long as the box is open or until a
// crashed deputy's leftovers are swept, and it must not shadow the user's
// for a deputy started there meanwhile. Nothing is lost: an empty file
// configures nothing. (To override a later directory's with an empty
// configuration, write "{}".)
func FindConfig(dirs ...string) (*Config, error) {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "deputy.yaml")
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().IsRegular() && fi.Size() == 0 {
			continue
		}
		return agentdef.LoadConfig(p)
	}
	return nil, nil
}

// DemoConfig is the configuration of the CLI's offline demo when no
// deputy.yaml exists: the haiku tier on a second scripted model, and
// illustrative prices so the cost table has figures (the rates of Claude
// Sonnet 4.5 and Haiku 4.5 as Anthropic lists them per million tokens; a
// scripted model costs nothing, and the CLI's table says the prices are
// illustrative).
func DemoConfig() *Config {
	return &Config{
		Tiers: map[string]string{agentdef.TierHaiku: "fake:haiku"},
		Prices: cost.Table{
			"fake":       {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30},
			"fake:haiku": {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10},
		},
	}
}
