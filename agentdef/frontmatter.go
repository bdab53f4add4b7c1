package agentdef

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/deputy-run/deputy/internal/yamlpos"
)

// Where the line is between front matter deputy reads and front matter it
// refuses.
//
// Claude Code parses front matter as YAML and, when that fails, quotes the
// values of simple top-level "key: value" lines and parses again, so that
// the common mistake of real files, an unquoted ": " in a one-line
// description, still loads. deputy does the same, with a warning, and
// nothing more: a line-by-line reading of broken YAML guesses at what the
// author meant (an unclosed "tools: [read_file, glob" read as [glob]), and a
// wrong guess about tools or isolation is worse than a refusal. So:
//
//   - a value is quoted only when its line is not valid YAML on its own, so
//     quoting never changes what valid lines mean;
//   - a value that opens a flow list or mapping ([ or {), a block scalar (|
//     or >) or a quoted string keeps its YAML meaning: if it is broken, the
//     file is refused;
//   - everything else that is not YAML (indentation, a value going on over
//     unindented lines, a key twice) is refused with the line it is on.
//
// Claude Code would quote an unclosed "[..." too and read a string; deputy
// refuses it, since that string is never what the author meant.

// fmIssue is a problem found in front matter; Issue.File is filled in by
// the caller.
type fmIssue struct {
	Issue
	warning bool
}

// inlineValue is a top-level key with its value on the same line.
var inlineValue = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:[ \t]+(\S.*?)[ \t]*$`)

// indentedKey is an indented line that reads as key: value.
var indentedKey = regexp.MustCompile(`^[ \t]+[A-Za-z_][A-Za-z0-9_-]*[ \t]*:([ \t]|$)`)

// dupKey is goccy's message for a key given twice.
var dupKey = regexp.MustCompile(`mapping key "(.*)" already defined at \[(\d+):\d+\]`)

// readFrontMatter parses the front matter's lines (file line i+2 is
// lines[i]). fields is nil when the front matter is refused; the issues
// then hold the error, with its line.
func readFrontMatter(lines []string) (fields map[string]any, issues []fmIssue) {
	m, err := parseYAMLMap(strings.Join(lines, "\n"))
	if err == nil {
		return m, nil
	}
	fixed, quoted := quoteLoneValues(lines)
	if len(quoted) > 0 {
		m, qerr := parseYAMLMap(strings.Join(fixed, "\n"))
		if qerr == nil {
			for _, q := range quoted {
				_, msg := yamlpos.OfError(q.err)
				issues = append(issues, fmIssue{warning: true, Issue: Issue{Line: q.i + 2, Msg: fmt.Sprintf(
					"%s: not valid YAML as written (%s); read as Claude Code reads it, the rest of the line as text (quote it to say so)",
					q.key, msg)}})
			}
			return m, issues
		}
		// What is left is broken however the values are read.
		err = qerr
	}
	line, msg := locateYAMLError(fixed, err)
	return nil, []fmIssue{{Issue: Issue{Line: line, Msg: msg}}}
}

type quotedLine struct {
	i   int
	key string
	err error // the line's own YAML error
}

// quoteLoneValues single-quotes the value of each top-level key: value
// line that is not valid YAML on its own, except values whose first
// character gives them a YAML structure (see above). Single quotes keep
// every character as written; the line count is unchanged, so positions
// in the result are positions in the file.
func quoteLoneValues(lines []string) ([]string, []quotedLine) {
	out := slices.Clone(lines)
	var quoted []quotedLine
	for i, l := range lines {
		m := inlineValue.FindStringSubmatch(l)
		if m == nil || strings.ContainsAny(m[2][:1], "[{|>\"'#") {
			continue
		}
		_, err := parseYAMLMap(l)
		if err == nil {
			continue
		}
		out[i] = m[1] + ": '" + strings.ReplaceAll(m[2], "'", "''") + "'"
		quoted = append(quoted, quotedLine{i: i, key: m[1], err: err})
	}
	return out, quoted
}

// locateYAMLError finds the file line of front matter that does not
// parse, and says what is wrong there. goccy's own position is often the
// line before the mistake (it reports where the construct it could not
// finish began, or the mapping a stray line broke), so each top-level
// entry, a key's line and the lines under it, is parsed alone first: the
// first that fails alone is the one to fix.
func locateYAMLError(lines []string, err error) (line int, msg string) {
	start := 0
	for i := 1; i <= len(lines); i++ {
		if i < len(lines) && !isEntryHead(lines[i]) {
			continue
		}
		if l, m, bad := entryError(lines, start, i); bad {
			return l, m
		}
		start = i
	}
	// Every entry parses alone: the entries conflict. An indented first
	// key makes every key after it misplaced; otherwise it is a key given
	// twice, or the like, and goccy's position is right.
	for _, l := range lines {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if l != strings.TrimLeft(l, " \t") && start > 0 {
			return firstContent(lines) + 2, fmt.Sprintf("%q is indented where a top-level key was expected", cutForMsg(strings.TrimSpace(l)))
		}
		break
	}
	pos, m := yamlpos.OfError(err)
	l := 1
	if pos.Line > 0 {
		l = pos.Line + 1 // front matter starts on file line 2
	}
	return l, "front matter is not valid YAML: " + yamlMsg(m)
}

// isEntryHead reports whether a front-matter line starts a top-level
// entry: it is at column 1 and is not a comment, an unindented list item
// of the key before, or the close of a flow list or mapping.
func isEntryHead(l string) bool {
	return l != "" && !strings.ContainsAny(l[:1], " \t#-]}")
}

// firstContent is the index of the first line that is neither blank nor a
// comment, or -1.
func firstContent(lines []string) int {
	for j, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return j
		}
	}
	return -1
}

// entryError parses lines[from:to], one top-level entry, alone.
func entryError(lines []string, from, to int) (line int, msg string, bad bool) {
	first := firstContent(lines[from:to])
	if first < 0 {
		return 0, "", false
	}
	first += from
	_, err := parseYAMLMap(strings.Join(lines[from:to], "\n"))
	if err == nil {
		return 0, "", false
	}
	head := lines[first]
	km := keyLine.FindStringSubmatch(head)
	if km == nil {
		if head != strings.TrimLeft(head, " \t") {
			return first + 2, fmt.Sprintf("%q is indented where a top-level key was expected", cutForMsg(strings.TrimSpace(head))), true
		}
		return first + 2, fmt.Sprintf("%q is not key: value (a value that goes on over several lines must be indented under its key, or quoted)",
			cutForMsg(strings.TrimSpace(head))), true
	}
	key := km[1]
	// A plain value on the key's line cannot have key: value lines under
	// it: such a line is a key indented by mistake, or the rest of a value
	// with ": " in it that needs quotes. goccy blames the key's line.
	if iv := inlineValue.FindStringSubmatch(head); iv != nil && !strings.ContainsAny(iv[2][:1], "[{|>\"'") {
		for j := from + 1; j < to; j++ {
			if indentedKey.MatchString(lines[j]) {
				return j + 2, fmt.Sprintf("%q is indented under %s's value but reads as key: value: a key of its own starts at column 1, and a value with \": \" in it must be quoted",
					cutForMsg(strings.TrimSpace(lines[j])), key), true
			}
		}
	}
	pos, m := yamlpos.OfError(err)
	return from + max(pos.Line, 1) + 1, key + ": not valid YAML: " + yamlMsg(m), true
}

// yamlMsg rewrites the goccy messages whose positions are relative to the
// front matter rather than the file.
func yamlMsg(m string) string {
	if d := dupKey.FindStringSubmatch(m); d != nil {
		first, _ := strconv.Atoi(d[2])
		return fmt.Sprintf("key %q appears twice (first on line %d)", d[1], first+1)
	}
	return m
}
