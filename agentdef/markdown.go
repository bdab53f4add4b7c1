package agentdef

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/deputy-run/deputy/internal/yamlpos"
	"github.com/deputy-run/deputy/permission"
)

// Issue is an error or warning about one file, with the line it concerns
// (0 when it concerns the whole file).
type Issue struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	Msg  string `json:"msg"`
}

func (i Issue) Error() string {
	if i.Line == 0 {
		return i.File + ": " + i.Msg
	}
	return fmt.Sprintf("%s:%d: %s", i.File, i.Line, i.Msg)
}

// Parsed is the outcome of reading one definition file. Def is nil when
// Errors is not empty.
type Parsed struct {
	File     string      `json:"file"`
	Def      *Definition `json:"definition,omitempty"`
	Errors   []Issue     `json:"errors,omitempty"`
	Warnings []Issue     `json:"warnings,omitempty"`
}

// Bounds against hostile files: front matter is a few lines in practice.
const (
	maxFrontMatter = 256 << 10
	maxYAMLAliases = 10 // no "billion laughs" through anchors
)

// Front-matter keys read into Definition: Claude Code's name, description,
// tools, disallowedTools, model, maxTurns, skills, background, isolation
// (none|sandbox|container, or Claude Code's "worktree"); and deputy's own
// mode (isolated|fork), modePinned, toolChoice, worktree, network,
// readPaths, writePaths, reportCap, and budget {totalTokens, wallTime,
// toolCalls, outputTokensPerCall}; mcpServers, Claude Code's, in the forms
// decodeMCPServers reads; Claude Code's permissionMode (checked) and hooks
// (kept raw, with its line, for package hook). Every other key goes to Extra with a warning.

// Claude Code keys deputy keeps in Extra without using them.
var claudeKeptKeys = []string{
	"effort", "color", "memory", "initialPrompt",
}

var budgetKeys = []string{"totalTokens", "wallTime", "toolCalls", "outputTokensPerCall"}

// keyLine finds top-level keys in front matter, so a problem with a field
// can name its line whichever way the front matter was parsed.
var keyLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:`)

// ParseDefinition reads one Claude Code style definition: YAML front
// matter between --- lines, then the system prompt as Markdown. Front
// matter that is not valid YAML is read the way Claude Code reads it
// (readFrontMatter), with a warning, or refused with its line. It never
// panics on any input.
func ParseDefinition(file string, data []byte) Parsed {
	fm, ok := splitFrontMatter(file, data)
	r := &defReader{p: Parsed{File: file, Errors: fm.errs, Warnings: fm.warns}, fm: fm}
	if !ok {
		return r.p
	}
	r.d = &Definition{Source: Source{File: file}, SystemPrompt: fm.body}
	for _, k := range fm.keysInOrder() {
		if err := r.field(k, fm.fields[k]); err != nil {
			r.fieldErr(k, "%v", err)
		}
	}
	r.resolveTools()
	r.check()
	if len(r.p.Errors) > 0 {
		return r.p
	}
	r.d.Source.Line = fm.lineOf["name"]
	r.p.Def = r.d
	return r.p
}

// defReader is ParseDefinition's state: the file's front matter, the
// definition read from it so far, and the issues found, each at its line.
type defReader struct {
	p  Parsed
	fm frontMatter
	d  *Definition
}

func (r *defReader) errAt(line int, format string, args ...any) {
	r.p.Errors = append(r.p.Errors, Issue{File: r.p.File, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (r *defReader) warnAt(line int, format string, args ...any) {
	r.p.Warnings = append(r.p.Warnings, Issue{File: r.p.File, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// fieldErr is an error about top-level key, at its line and naming it.
func (r *defReader) fieldErr(key, format string, args ...any) {
	r.errAt(keyLineOr1(r.fm.lineOf, key), key+": "+format, args...)
}

// fieldWarn is a warning about top-level key, at its line and naming it.
func (r *defReader) fieldWarn(key, format string, args ...any) {
	r.warnAt(keyLineOr1(r.fm.lineOf, key), key+": "+format, args...)
}

// keysInOrder is the front matter's top-level keys in document order, so
// messages read top to bottom.
func (fm frontMatter) keysInOrder() []string {
	keys := make([]string, 0, len(fm.fields))
	for k := range fm.fields {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		li, lj := fm.lineOf[keys[i]], fm.lineOf[keys[j]]
		if li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// field reads top-level key k into the definition: one case per key
// ParseDefinition knows, the rest kept in Extra. The error is about v's
// type or value; the caller puts it at k's line.
func (r *defReader) field(k string, v any) (err error) {
	d := r.d
	switch k {
	case "name":
		d.Name, err = asString(v)
	case "description":
		d.Description, err = asString(v)
	case "tools":
		d.DeclaredTools, err = asList(v)
	case "disallowedTools":
		d.DisallowedTools, err = asList(v)
	case "skills":
		d.Skills, err = asList(v)
	case "network":
		d.Network, err = asList(v)
	case "readPaths":
		d.ReadPaths, err = asList(v)
	case "writePaths":
		d.WritePaths, err = asList(v)
	case "model":
		d.Model, err = asString(v)
	case "toolChoice":
		d.ToolChoice, err = asString(v)
	case "maxTurns":
		d.MaxTurns, err = asInt(v)
	case "reportCap":
		d.ReportCap, err = asInt(v)
	case "background":
		d.Background, err = asBool(v)
	case "worktree":
		var w bool
		w, err = asBool(v)
		d.Worktree = d.Worktree || w // isolation: worktree also sets it, whichever comes first
	case "modePinned":
		d.ModePinned, err = asBool(v)
	case "mode":
		d.Mode, err = asStringOf[Mode](v)
	case "isolation":
		err = r.isolation(v)
	case "budget":
		err = decodeBudget(v, &d.Budgets)
	case "mcpServers":
		r.mcpServers(k, v)
	case "permissionMode":
		// Definition.Check refuses a mode that does not exist, at this line.
		d.PermissionMode, err = asStringOf[permission.Mode](v)
	case "hooks":
		if v != nil {
			d.Hooks = &RawHooks{Value: v, File: r.p.File, Line: keyLineOr1(r.fm.lineOf, k)}
		}
	default:
		r.extra(k, v)
	}
	return err
}

// asStringOf is asString for a string type of deputy's own (Mode).
func asStringOf[T ~string](v any) (T, error) {
	s, err := asString(v)
	return T(s), err
}

// isolation reads the isolation key. Claude Code writes isolation:
// worktree for "run in a git worktree"; deputy keeps that as its own
// flag.
func (r *defReader) isolation(v any) error {
	s, err := asString(v)
	if s == "worktree" {
		r.d.Worktree = true
		s = string(IsolationNone)
	}
	r.d.Isolation = Isolation(s)
	return err
}

// mcpServers reads the mcpServers key (k), each issue at the line of the
// server it concerns.
func (r *defReader) mcpServers(k string, v any) {
	var issues []mcpIssue
	r.d.MCPServers, issues = decodeMCPServers(v)
	for _, is := range issues {
		line := nestedLine(r.fm.lines, r.fm.lineOf[k], is.server)
		if is.warning {
			r.warnAt(line, "%s: server %s: %s", k, is.server, is.msg)
		} else if is.server != "" {
			r.errAt(line, "%s: server %s: %s", k, is.server, is.msg)
		} else {
			r.errAt(line, "%s: %s", k, is.msg)
		}
	}
}

// extra keeps a key deputy does not read in Extra, so nothing the file
// says is lost, with a warning, so a misspelt key does not go unseen.
func (r *defReader) extra(k string, v any) {
	if r.d.Extra == nil {
		r.d.Extra = map[string]any{}
	}
	r.d.Extra[k] = v
	if slices.Contains(claudeKeptKeys, k) {
		r.fieldWarn(k, "kept but not used by deputy")
	} else {
		r.fieldWarn(k, "unknown field, kept but not used")
	}
}

// resolveTools turns the declared tools and disallowedTools (Claude Code's
// names among them) into deputy's, warning about those it drops.
func (r *defReader) resolveTools() {
	var dropped, notes []string
	r.d.Tools, dropped, notes = mapTools(r.d.DeclaredTools, false)
	for _, n := range dropped {
		r.fieldWarn("tools", "%q is not a tool deputy can serve; dropped", n)
	}
	for _, n := range notes {
		r.fieldWarn("tools", "%s", n)
	}
	var disallowed []string
	disallowed, dropped, notes = mapTools(r.d.DisallowedTools, true)
	for _, n := range dropped {
		r.fieldWarn("disallowedTools", "%q is not a tool deputy serves; nothing to disallow", n)
	}
	for _, n := range notes {
		r.fieldWarn("disallowedTools", "%s", n)
	}
	if len(disallowed) > 0 {
		r.d.DisallowedTools = disallowed
	} else {
		r.d.DisallowedTools = nil
	}
}

// check puts the definition's own checks (Definition.Check) at the lines
// of the fields they concern.
func (r *defReader) check() {
	for _, pr := range r.d.Check() {
		key := pr.Field
		line := keyLineOr1(r.fm.lineOf, key)
		if pr.Key != "" {
			line = nestedLine(r.fm.lines, line, pr.Key)
		}
		if pr.Warning {
			r.warnAt(line, "%s: %s", key, pr.Msg)
		} else {
			r.errAt(line, "%s: %s", key, pr.Msg)
		}
	}
}

// frontMatter is a Markdown file split into its parsed front matter and
// its body.
type frontMatter struct {
	fields      map[string]any
	lines       []string       // the front matter's lines; line i is file line i+2
	lineOf      map[string]int // top-level key -> file line
	body        string         // trimmed
	errs, warns []Issue
}

// splitFrontMatter reads the --- delimited front matter (readFrontMatter);
// ok is false when the file is unusable.
func splitFrontMatter(file string, data []byte) (fm frontMatter, ok bool) {
	errAt := func(line int, format string, args ...any) {
		fm.errs = append(fm.errs, Issue{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		errAt(1, "no front matter: the file must start with a --- line")
		return fm, false
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		errAt(1, "front matter is not closed by a --- line")
		return fm, false
	}
	fmLines := lines[1:end]
	fm.lines = fmLines
	src := strings.Join(fmLines, "\n")
	if len(src) > maxFrontMatter {
		errAt(2, "front matter is %d bytes; at most %d", len(src), maxFrontMatter)
		return fm, false
	}
	// File line of front-matter line i (0-based) is i+2.
	fm.lineOf = map[string]int{}
	for i, l := range fmLines {
		if m := keyLine.FindStringSubmatch(l); m != nil {
			if _, seen := fm.lineOf[m[1]]; !seen {
				fm.lineOf[m[1]] = i + 2
			}
		}
	}
	var issues []fmIssue
	fm.fields, issues = readFrontMatter(fmLines)
	for _, is := range issues {
		is.File = file
		if is.warning {
			fm.warns = append(fm.warns, is.Issue)
		} else {
			fm.errs = append(fm.errs, is.Issue)
		}
	}
	if fm.fields == nil {
		return fm, false
	}
	fm.body = strings.TrimSpace(strings.Join(lines[end+1:], "\n"))
	return fm, true
}

// nestedLine is the file line of key within the top-level key at file
// line under (an MCP server's name under mcpServers, as a mapping key or a
// list entry), or under itself when it cannot be found.
func nestedLine(fmLines []string, under int, key string) int {
	if key == "" || under < 2 {
		return under
	}
	q := regexp.QuoteMeta(key)
	re := regexp.MustCompile(`^\s+(-\s+)?(` + q + `|"` + q + `"|'` + q + `')\s*(:|$)|"` + q + `"\s*:|^\s+(-\s+)?name:\s*["']?` + q + `["']?\s*$`)
	for i := under - 2; i < len(fmLines); i++ { // from the key's own line: a flow mapping is on it
		if i > under-2 && keyLine.MatchString(fmLines[i]) {
			break // the next top-level key
		}
		if re.MatchString(fmLines[i]) {
			return i + 2
		}
	}
	return under
}

// keyLineOr1 is the line of a key, or line 1 (the front matter's opening
// ---) for a key that is missing, so every problem has a file:line.
func keyLineOr1(lineOf map[string]int, key string) int {
	if l := lineOf[key]; l > 0 {
		return l
	}
	return 1
}

var errNotMapping = errors.New("front matter is not a mapping of keys to values")

// parseYAMLMap parses front matter as a YAML mapping.
func parseYAMLMap(fm string) (map[string]any, error) {
	if strings.TrimSpace(fm) == "" {
		return map[string]any{}, nil
	}
	f, err := yamlpos.Parse([]byte(fm), nil)
	if err != nil {
		return nil, err
	}
	if n := yamlpos.CountAliases(f); n > maxYAMLAliases {
		return nil, fmt.Errorf("%d YAML aliases; at most %d", n, maxYAMLAliases)
	}
	// A list or a lone scalar would fail to unmarshal with goccy's words
	// for Go types; say what is wrong in the file's terms.
	if len(f.Docs) > 0 && f.Docs[0] != nil && f.Docs[0].Body != nil {
		switch f.Docs[0].Body.Type() {
		case ast.MappingType, ast.MappingValueType, ast.CommentType:
		default:
			return nil, errNotMapping
		}
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(fm), &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errNotMapping
	}
	return m, nil
}

func cutForMsg(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// unquote strips one pair of matching surrounding quotes.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

func asString(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("want a string, got %s", kindOf(v))
}

// asList accepts a YAML list or a comma-separated string (Claude Code's
// usual spelling: tools: Read, Grep, Glob). "[]" written line by line is
// the empty list.
func asList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		s := strings.TrimSpace(x)
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		out := []string{}
		for _, part := range strings.Split(s, ",") {
			if part = unquote(strings.TrimSpace(part)); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, err := asString(e)
			if err != nil {
				return nil, fmt.Errorf("list entry: %v", err)
			}
			out = append(out, strings.TrimSpace(s))
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list or a comma-separated string, got %s", kindOf(v))
}

func asInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		if x > math.MaxInt32 || x < math.MinInt32 {
			return 0, fmt.Errorf("%d is out of range", x)
		}
		return int(x), nil
	case uint64:
		if x > math.MaxInt32 {
			return 0, fmt.Errorf("%d is out of range", x)
		}
		return int(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			return 0, fmt.Errorf("%v is not a whole number in range", x)
		}
		return int(x), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || n > math.MaxInt32 || n < math.MinInt32 {
			return 0, fmt.Errorf("%q is not a whole number in range", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("want a number, got %s", kindOf(v))
}

func asBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes":
			return true, nil
		case "false", "no":
			return false, nil
		}
		return false, fmt.Errorf("%q is not true or false", x)
	}
	return false, fmt.Errorf("want true or false, got %s", kindOf(v))
}

// asDuration reads "10m", "90s" or a number of seconds.
func asDuration(v any) (time.Duration, error) {
	if s, ok := v.(string); ok {
		if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
			return d, nil
		}
	}
	n, err := asInt(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration like 10m or a number of seconds: %v", err)
	}
	return time.Duration(n) * time.Second, nil
}

func decodeBudget(v any, b *Budgets) error {
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		return fmt.Errorf("want a mapping of %s, got %s", strings.Join(budgetKeys, ", "), kindOf(v))
	}
	var err error
	// Sorted: only the first problem is reported, and a map's order would
	// make which one change from run to run.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		x := m[k]
		switch k {
		case "totalTokens":
			b.TotalTokens, err = asInt(x)
		case "wallTime":
			b.WallTime, err = asDuration(x)
		case "toolCalls":
			b.ToolCalls, err = asInt(x)
		case "outputTokensPerCall":
			b.OutputTokensPerCall, err = asInt(x)
		default:
			err = fmt.Errorf("unknown key (want %s)", strings.Join(budgetKeys, ", "))
		}
		if err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
	}
	return nil
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}
