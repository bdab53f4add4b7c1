package deputy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/permission"
)

// Permissions is what LoadPermissions read: the policy in force for a
// workspace's root, where each part came from, and what was left out.
type Permissions struct {
	// Policy is the merged rules and the mode.
	Policy permission.Policy
	// Files are the files that existed and were read, highest precedence
	// first, with the rules each gave.
	Files []PermissionFile
	// Skipped are the allow and ask rules that did not parse, each a
	// *permission.SettingsError with file:line; the rest loaded.
	Skipped []error
}

// PermissionFile is one file's part of Permissions.
type PermissionFile struct {
	Path             string
	Allow, Ask, Deny int
	// Mode is the file's defaultMode, "" when it sets none.
	Mode permission.Mode
}

// LoadPermissions is the permission policy of a root started in project
// (home is the user's home directory, "" for none): the rules of
// deputy.yaml's permissions section (cfg, which may be nil) and of Claude
// Code's settings files, permission.SettingsPaths(project, home):
// .claude/settings.local.json, .claude/settings.json,
// ~/.claude/settings.json.
//
// Rules of every file are merged (deny beats ask beats allow wherever
// each came from). The mode is the defaultMode of the highest-precedence
// file that sets one: deputy.yaml first, since it is deputy's own file
// and says what deputy does, then the settings files in Claude Code's
// order; none sets default. A malformed file, a bad defaultMode and a deny
// rule that cannot be read fail the load (fail closed); a bad allow or
// ask rule is left out and reported in Skipped.
//
// (This is the one function the runtime's wiring calls for a root's
// policy; deputy doctor lists what it read.)
func LoadPermissions(project, home string, cfg *Config) (Permissions, error) {
	paths := permission.SettingsPaths(project, home)
	st, err := permission.LoadSettings(paths...)
	if err != nil {
		return Permissions{}, err
	}
	var out Permissions
	var allow, ask, deny []permission.Rule
	mode := permission.Mode("")
	if cfg != nil && cfg.Permissions.Line > 0 {
		c := &cfg.Permissions
		out.Files = append(out.Files, PermissionFile{Path: c.File, Allow: len(c.Set.Allow), Ask: len(c.Set.Ask), Deny: len(c.Set.Deny), Mode: c.Mode})
		allow, ask, deny = slices.Clone(c.Set.Allow), slices.Clone(c.Set.Ask), slices.Clone(c.Set.Deny)
		mode = c.Mode
		out.Skipped = append(out.Skipped, c.Skipped...)
	}
	set := st.Policy.Set
	for _, f := range st.Files {
		pf := PermissionFile{Path: f, Allow: countFrom(set.Allow, f), Ask: countFrom(set.Ask, f), Deny: countFrom(set.Deny, f)}
		pf.Mode, err = settingsMode(f)
		if err != nil {
			return Permissions{}, err
		}
		out.Files = append(out.Files, pf)
		if mode == "" {
			mode = pf.Mode
		}
	}
	out.Skipped = append(out.Skipped, st.Skipped...)
	if mode == "" {
		mode = permission.ModeDefault
	}
	out.Policy = permission.Policy{Mode: mode, Set: permission.NewSet(append(allow, set.Allow...), append(ask, set.Ask...), append(deny, set.Deny...))}
	return out, nil
}

// countFrom counts the rules read from file (their Source is file:line).
func countFrom(rules []permission.Rule, file string) int {
	n := 0
	for _, r := range rules {
		if rest, ok := strings.CutPrefix(r.Source, file); ok && strings.HasPrefix(rest, ":") {
			n++
		}
	}
	return n
}

// settingsMode is one settings file's defaultMode, "" when it sets none
// (LoadSettings gives only the merged mode).
func settingsMode(file string) (permission.Mode, error) {
	st, err := permission.LoadSettings(file)
	if err != nil {
		return "", fmt.Errorf("permissions: %w", err)
	}
	if st.ModeFrom == "" {
		return "", nil
	}
	return st.Policy.Mode, nil
}
