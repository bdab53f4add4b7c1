package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Event is a point of a run where hooks run, named as in Claude Code.
type Event string

// The events deputy runs hooks at.
const (
	PreToolUse       Event = "PreToolUse"
	PostToolUse      Event = "PostToolUse"
	UserPromptSubmit Event = "UserPromptSubmit"
	Stop             Event = "Stop"
	SubagentStart    Event = "SubagentStart"
	SubagentStop     Event = "SubagentStop"
	PreCompact       Event = "PreCompact"
	SessionStart     Event = "SessionStart"
	SessionEnd       Event = "SessionEnd"
	Notification     Event = "Notification"
)

// Events lists every event deputy runs, in the order of a run.
func Events() []Event {
	return []Event{SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, SubagentStart, SubagentStop,
		PreCompact, Notification, Stop, SessionEnd}
}

func knownEvent(name string) bool { return slices.Contains(Events(), Event(name)) }

// DefaultTimeout is a hook's timeout when its entry gives none (Claude
// Code's default).
const DefaultTimeout = 60 * time.Second

// Kinds of hook.
const (
	TypeCommand = "command"
	TypeHTTP    = "http"
)

// Hook is one configured hook.
type Hook struct {
	Type    string        // TypeCommand or TypeHTTP
	Command string        // a command hook's shell command line
	URL     string        // an http hook's endpoint
	Headers []Header      // an http hook's headers, in the order written
	Timeout time.Duration // DefaultTimeout when not given
	// AllowedEnvVars names the variables an http hook's header values may
	// interpolate ($NAME or ${NAME}); any other reference stays empty.
	AllowedEnvVars []string
	// Source is where the hook was written: file:line.
	Source string
}

// Header is one http hook header, its value as written (before
// interpolation).
type Header struct{ Name, Value string }

// String names the hook in errors without anything that may hold a
// credential: a command hook by its program (the command line's first
// word; its arguments may carry a token, as in curl -H "Authorization:
// ..."), an http hook by its URL with any password elided, never its
// headers. Source says which entry it is.
func (h *Hook) String() string {
	if h.Type == TypeHTTP {
		if u, err := url.Parse(h.URL); err == nil {
			return "http hook " + u.Redacted()
		}
		return "http hook"
	}
	prog, _, _ := strings.Cut(strings.TrimSpace(h.Command), " ")
	return "hook " + prog
}

// key identifies a hook for de-duplication: Claude Code runs a command
// (or URL) that several matching groups name once.
func (h *Hook) key() string { return h.Type + "\x00" + h.Command + "\x00" + h.URL }

// Group is a matcher and the hooks it selects.
type Group struct {
	Matcher string
	Hooks   []Hook
	Source  string // file:line of the group
	m       matcher
}

// Config is the hooks in force: those of every settings file read, then
// a definition's, in the order they run and are combined.
type Config struct {
	groups map[Event][]Group
	// Files are the files read, in order.
	Files []string
	// Skipped are the entries that did not load, each a *ConfigError
	// with file:line; the rest of the file loaded.
	Skipped []error
}

// ConfigError is a problem at a place in a file.
type ConfigError struct {
	File string
	Line int    // 0 when unknown
	Path string // where in the hooks value, e.g. PreToolUse[0].hooks[1].timeout
	Err  error
}

func (e *ConfigError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: hooks.%s: %v", where, e.Path, e.Err)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Groups returns the event's groups in the order they run.
func (c *Config) Groups(ev Event) []Group {
	if c == nil {
		return nil
	}
	return c.groups[ev]
}

// Entry is one configured hook with the event and matcher it runs for,
// as List gives them (for deputy doctor).
type Entry struct {
	Event   Event
	Matcher string
	Hook    Hook
}

// List gives every configured hook, event by event in the order of
// Events, each event's in the order they run.
func (c *Config) List() []Entry {
	var out []Entry
	for _, ev := range Events() {
		for _, g := range c.Groups(ev) {
			for _, h := range g.Hooks {
				out = append(out, Entry{Event: ev, Matcher: g.Matcher, Hook: h})
			}
		}
	}
	return out
}

// Empty reports whether no hook is configured at all.
func (c *Config) Empty() bool {
	if c == nil {
		return true
	}
	for _, g := range c.groups {
		if len(g) > 0 {
			return false
		}
	}
	return true
}

// Merge returns c's hooks followed by o's (neither is changed): settings
// files first, then a definition's front matter.
func (c *Config) Merge(o *Config) *Config {
	out := &Config{groups: map[Event][]Group{}}
	for _, x := range []*Config{c, o} {
		if x == nil {
			continue
		}
		for ev, gs := range x.groups {
			out.groups[ev] = append(out.groups[ev], gs...)
		}
		out.Files = append(out.Files, x.Files...)
		out.Skipped = append(out.Skipped, x.Skipped...)
	}
	return out
}

// LoadSettings reads the hooks of Claude Code settings files, given
// highest precedence first (permission.SettingsPaths gives them in that
// order); a file that does not exist is skipped. Hooks of every file run
// (Claude Code merges them rather than letting one file replace
// another), in the order the files are given, each file's in the order
// written. Only the "hooks" key is read.
//
// An entry that is wrong (an unknown event or hook type, a matcher that
// does not compile, a missing command, a bad timeout) is left out and
// reported in Skipped with its file:line; the rest loads. A file that is
// not JSON, or whose hooks value is not an object, fails the load, like
// permission.LoadSettings does for the same file.
func LoadSettings(paths ...string) (*Config, error) {
	out := &Config{groups: map[Event][]Group{}}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hook settings: %w", err)
		}
		c, err := ParseSettings(p, data)
		if err != nil {
			return nil, err
		}
		out = out.Merge(c)
	}
	return out, nil
}

// ParseSettings reads the hooks of one settings file's text; file names
// it in errors and sources.
func ParseSettings(file string, data []byte) (*Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, jsonError(file, data, err)
	}
	c := &Config{groups: map[Event][]Group{}, Files: []string{file}}
	raw, ok := top["hooks"]
	if !ok {
		return c, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, jsonError(file, data, err)
	}
	lines := jsonLines(data)
	// A path that is not in the text (a missing key) takes the line of
	// the nearest enclosing value that is.
	line := func(path string) int {
		for {
			if l, ok := lines[path]; ok {
				return l
			}
			i := strings.LastIndexAny(path, ".[")
			if i < 0 {
				return 1
			}
			path = path[:i]
		}
	}
	if err := c.read(file, v, func(p string) int { return line(joinPath("hooks", p)) }); err != nil {
		return nil, err
	}
	return c, nil
}

// FromFrontMatter reads a definition's hooks front matter, as agentdef
// decoded it (Definition.Extra["hooks"]). file and line are where the
// hooks key is written: the decoded value has no positions of its own,
// so every problem is reported at that line with its path inside the
// value (hooks.PreToolUse[0].hooks[1].timeout).
func FromFrontMatter(file string, line int, v any) (*Config, error) {
	c := &Config{groups: map[Event][]Group{}, Files: []string{file}}
	if v == nil {
		return c, nil
	}
	if err := c.read(file, v, func(string) int { return line }); err != nil {
		return nil, err
	}
	return c, nil
}

// read fills c from a decoded hooks value. Only a value that is not an
// object fails; every other problem is skipped with its place.
func (c *Config) read(file string, v any, line func(path string) int) error {
	m, ok := v.(map[string]any)
	if !ok {
		return &ConfigError{File: file, Line: line(""), Err: fmt.Errorf("hooks must be an object of events, not %s", kindOf(v))}
	}
	skip := func(path string, format string, args ...any) {
		c.Skipped = append(c.Skipped, &ConfigError{File: file, Line: line(path), Path: path, Err: fmt.Errorf(format, args...)})
	}
	// Events in the order written where lines are known; a map has none.
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		li, lj := line(names[i]), line(names[j])
		if li != lj {
			return li < lj
		}
		return names[i] < names[j]
	})
	for _, ev := range names {
		if !knownEvent(ev) {
			skip(ev, "event %q is not one deputy runs hooks at (%s)", ev, eventList())
			continue
		}
		list, ok := m[ev].([]any)
		if !ok {
			skip(ev, "must be an array of matcher groups, not %s", kindOf(m[ev]))
			continue
		}
		for i, gv := range list {
			gp := fmt.Sprintf("%s[%d]", ev, i)
			g, ok := c.readGroup(file, gp, gv, line, skip)
			if ok {
				c.groups[Event(ev)] = append(c.groups[Event(ev)], g)
			}
		}
	}
	sortSkipped(c.Skipped)
	return nil
}

func (c *Config) readGroup(file, gp string, gv any, line func(string) int, skip func(string, string, ...any)) (Group, bool) {
	gm, ok := gv.(map[string]any)
	if !ok {
		skip(gp, "a matcher group must be an object, not %s", kindOf(gv))
		return Group{}, false
	}
	g := Group{Source: fmt.Sprintf("%s:%d", file, line(gp))}
	if mv, ok := gm["matcher"]; ok && mv != nil {
		s, ok := mv.(string)
		if !ok {
			skip(gp+".matcher", "must be a string, not %s", kindOf(mv))
			return Group{}, false
		}
		m, err := compileMatcher(s)
		if err != nil {
			skip(gp+".matcher", "%v", err)
			return Group{}, false
		}
		g.Matcher, g.m = s, m
	} else {
		g.m, _ = compileMatcher("")
	}
	hv, ok := gm["hooks"].([]any)
	if !ok {
		skip(gp+".hooks", "must be an array of hooks, not %s", kindOf(gm["hooks"]))
		return Group{}, false
	}
	for j, h := range hv {
		hp := fmt.Sprintf("%s.hooks[%d]", gp, j)
		hk, err := readHook(h, hp, skip)
		if err {
			continue
		}
		hk.Source = fmt.Sprintf("%s:%d", file, line(hp))
		g.Hooks = append(g.Hooks, hk)
	}
	return g, len(g.Hooks) > 0
}

// readHook reads one hook entry; bad is true when it was skipped (and
// reported).
func readHook(v any, hp string, skip func(string, string, ...any)) (h Hook, bad bool) {
	m, ok := v.(map[string]any)
	if !ok {
		skip(hp, "a hook must be an object, not %s", kindOf(v))
		return h, true
	}
	typ, _ := m["type"].(string)
	h.Type = typ
	switch typ {
	case TypeCommand:
		cmd, ok := m["command"].(string)
		if !ok || strings.TrimSpace(cmd) == "" {
			skip(hp+".command", "a command hook needs a command (a non-empty string)")
			return h, true
		}
		h.Command = cmd
	case TypeHTTP:
		u, ok := m["url"].(string)
		if !ok {
			skip(hp+".url", "an http hook needs a url (a string)")
			return h, true
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			skip(hp+".url", "an http hook's url must be an absolute http:// or https:// URL")
			return h, true
		}
		h.URL = u
		if hv, ok := m["headers"]; ok {
			hm, ok := hv.(map[string]any)
			if !ok {
				skip(hp+".headers", "must be an object of header names to strings, not %s", kindOf(hv))
				return h, true
			}
			for _, k := range sortedKeys(hm) {
				s, ok := hm[k].(string)
				if !ok {
					skip(hp+".headers."+k, "must be a string, not %s", kindOf(hm[k]))
					return h, true
				}
				h.Headers = append(h.Headers, Header{Name: k, Value: s})
			}
		}
		if av, ok := m["allowedEnvVars"]; ok {
			list, ok := av.([]any)
			if !ok {
				skip(hp+".allowedEnvVars", "must be an array of variable names, not %s", kindOf(av))
				return h, true
			}
			for _, e := range list {
				s, ok := e.(string)
				if !ok {
					skip(hp+".allowedEnvVars", "must be an array of variable names; found %s", kindOf(e))
					return h, true
				}
				h.AllowedEnvVars = append(h.AllowedEnvVars, s)
			}
		}
	case "":
		skip(hp+".type", `a hook needs a type ("command" or "http")`)
		return h, true
	default:
		skip(hp+".type", `hook type %q is not one deputy runs ("command" or "http")`, typ)
		return h, true
	}
	h.Timeout = DefaultTimeout
	if tv, ok := m["timeout"]; ok && tv != nil {
		s, ok := number(tv)
		if !ok || !(s > 0) || s > math.MaxInt64/float64(time.Second) {
			skip(hp+".timeout", "must be a positive number of seconds, not %s", printable(tv))
			return h, true
		}
		h.Timeout = time.Duration(s * float64(time.Second))
	}
	return h, false
}

// number reads a JSON or YAML number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func printable(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	if n, ok := number(v); ok {
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return kindOf(v)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	if _, ok := number(v); ok {
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func eventList() string {
	var s []string
	for _, e := range Events() {
		s = append(s, string(e))
	}
	return strings.Join(s, ", ")
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sortSkipped(s []error) {
	slices.SortStableFunc(s, func(a, b error) int {
		var x, y *ConfigError
		if errors.As(a, &x) && errors.As(b, &y) {
			return x.Line - y.Line
		}
		return 0
	})
}

func joinPath(base, p string) string {
	switch {
	case p == "":
		return base
	case base == "":
		return p
	case p[0] == '[':
		return base + p
	}
	return base + "." + p
}

// jsonLines maps the path of every value in a JSON text (a.b[2].c; the
// top level is "") to the line it starts on; an object member's line is
// its key's. The text must be valid JSON.
func jsonLines(data []byte) map[string]int {
	lines := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	lineAt := func() int {
		off := int(dec.InputOffset())
		for off < len(data) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++
		}
		return 1 + bytes.Count(data[:off], []byte("\n"))
	}
	var walk func(path string, line int) error
	walk = func(path string, line int) error {
		lines[path] = line
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				l := lineAt()
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				if err := walk(joinPath(path, ks), l); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), lineAt()); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	_ = walk("", lineAt())
	return lines
}

// jsonError turns a decoding error into file:line where it can.
func jsonError(file string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64 = -1
	switch {
	case errors.As(err, &se):
		off = max(se.Offset-1, 0)
	case errors.As(err, &te):
		off = te.Offset
		err = errors.New("settings must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data))
	}
	if off < 0 {
		return &ConfigError{File: file, Err: fmt.Errorf("malformed JSON: %w", err)}
	}
	off = min(off, int64(len(data)))
	return &ConfigError{File: file, Line: 1 + bytes.Count(data[:off], []byte("\n")), Err: fmt.Errorf("malformed JSON: %v", err)}
}
