package hook

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// matcher is a compiled Claude Code matcher. Claude Code reads a matcher
// three ways: empty or "*" matches everything; one made only of letters,
// digits, _ and | is a list of exact names (Edit|Write); anything else is
// a regular expression, searched for (not anchored) in the value, so
// "mcp__github__.*" or "Notebook.*" work as written. Matching is case
// sensitive, as there.
type matcher struct {
	all   bool
	names []string
	re    *regexp.Regexp
}

var plainMatcher = regexp.MustCompile(`^[A-Za-z0-9_|]+$`)

func compileMatcher(s string) (matcher, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return matcher{all: true}, nil
	}
	if plainMatcher.MatchString(s) {
		var names []string
		for _, n := range strings.Split(s, "|") {
			if n != "" {
				names = append(names, n)
			}
		}
		return matcher{names: names}, nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return matcher{}, fmt.Errorf("matcher %q is not a regular expression: %v", s, err)
	}
	return matcher{re: re}, nil
}

// match reports whether any of values matches (a tool is matched by its
// Claude Code name and by deputy's).
func (m *matcher) match(values ...string) bool {
	if m.all {
		return true
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		if m.re != nil && m.re.MatchString(v) || slices.Contains(m.names, v) {
			return true
		}
	}
	return false
}

// Match reports whether the group's matcher selects any of values.
func (g *Group) Match(values ...string) bool { return g.m.match(values...) }

// matchValues is what an event's matchers are matched against: the tool
// for the tool events (Claude Code's name and deputy's; spawning also as
// Agent, Claude Code's newer name for Task), the agent type for the
// subagent events, the trigger, source or reason, the notification type.
// UserPromptSubmit and Stop have no matcher: every group runs.
func matchValues(in *Input) []string {
	switch in.Event {
	case PreToolUse, PostToolUse:
		cc := ClaudeName(in.Tool)
		if cc == "Task" {
			return []string{cc, "Agent", in.Tool}
		}
		return []string{cc, in.Tool}
	case SubagentStart, SubagentStop:
		return []string{in.AgentType}
	case PreCompact:
		return []string{in.Trigger}
	case SessionStart:
		return []string{in.Source}
	case SessionEnd:
		return []string{in.Reason}
	case Notification:
		return []string{in.NotificationType}
	}
	return nil
}

// Matching returns the hooks that run for in, in order, each command or
// URL once however many groups select it.
func (c *Config) Matching(in *Input) []Hook {
	if c == nil {
		return nil
	}
	groups := c.groups[in.Event]
	if len(groups) == 0 {
		return nil
	}
	vals := matchValues(in)
	var out []Hook
	for i := range groups {
		g := &groups[i]
		if vals != nil && !g.m.match(vals...) {
			continue
		}
		for _, h := range g.Hooks {
			if !slices.ContainsFunc(out, func(o Hook) bool { return o.key() == h.key() }) {
				out = append(out, h)
			}
		}
	}
	return out
}
