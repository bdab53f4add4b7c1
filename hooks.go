package deputy

import (
	"path/filepath"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/permission"
)

// LoadHooks reads the hooks of a workspace's Claude Code settings files
// (.claude/settings.local.json, .claude/settings.json, then home's
// ~/.claude/settings.json; permission.SettingsPaths) for Options.Hooks:
// nil when none is configured. Hooks run with ws as CLAUDE_PROJECT_DIR,
// and each instance's JSONL transcript, which transcript_path names, is
// ws/.deputy/transcripts/ID.jsonl, beside the database (the workspace's
// state directory, which fenced children cannot write). Entries that did
// not load are in the config's Skipped, with file:line (deputy doctor
// lists them); a file that is not JSON is an error.
func LoadHooks(ws, home string) (*agent.Hooks, error) {
	cfg, err := hook.LoadSettings(permission.SettingsPaths(ws, home)...)
	if err != nil {
		return nil, err
	}
	if cfg.Empty() {
		return nil, nil
	}
	return &agent.Hooks{Settings: cfg, Runner: hook.Runner{ProjectDir: ws},
		TranscriptDir: filepath.Join(ws, ".deputy", "transcripts")}, nil
}
