package fstool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Glob is the glob tool.
type Glob struct{ confined }

// NewGlob returns glob confined to ws.
func NewGlob(ws *Workspace, lim Limits) *Glob {
	return &Glob{confine(ws, lim)}
}

// Spec implements tool.Tool.
func (t *Glob) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "glob",
		Description: fmt.Sprintf("List workspace paths matching a glob pattern, sorted. `*` matches within one "+
			"path segment, `**` matches any number of directories, `?` one character, `[abc]` a class, "+
			"`{a,b}` alternatives. Examples: `**/*.go`, `src/**/test_*.py`, `docs/*`. Patterns are relative "+
			"to the workspace root. Directories are listed with a trailing `/`. Paths git ignores (.gitignore "+
			"files, .git/info/exclude) are left out unless include_ignored is true or the pattern's literal "+
			"start names an ignored directory; .git and .deputy directories are skipped either way, and "+
			"symlinked directories are not entered. At most %d paths are listed.", t.lim.GlobResults),
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Glob pattern relative to the workspace root, e.g. **/*.go"},
    "include_ignored": {"type": "boolean", "description": "Also list paths that .gitignore or .git/info/exclude ignore (build output, dependencies). Default false."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (t *Glob) ReadOnly() bool { return true }

// Run implements tool.Tool.
func (t *Glob) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Pattern        string `json:"pattern"`
		IncludeIgnored bool   `json:"include_ignored"`
	}](input)
	if err != nil {
		return "", err
	}
	pattern := strings.TrimPrefix(in.Pattern, "./")
	if !doublestar.ValidatePattern(pattern) {
		return "", fmt.Errorf("invalid glob pattern %q (check brackets and braces)", in.Pattern)
	}
	base, pat := doublestar.SplitPattern(pattern)
	base = unescape(base) // the base has no unescaped meta characters left
	r, start, hide, err := t.ws.openPath(base)
	if err != nil {
		return "", err
	}
	defer r.Close()
	shownBase, err := t.ws.lexical(base)
	if err != nil {
		return "", err
	}
	start = display(start)
	if _, err := r.Stat(start); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("no paths match %s (%s does not exist)", in.Pattern, base), nil
		}
		return "", t.ws.pathErr(base, err)
	}
	matches, truncated, err := t.match(ctx, r, hide, in.IncludeIgnored, start, display(shownBase), pat)
	if err != nil {
		return "", t.ws.pathErr(base, err)
	}
	if len(matches) == 0 && !truncated {
		return fmt.Sprintf("no paths match %s", in.Pattern), nil
	}
	return t.list(matches, truncated), nil
}

// match walks the directory start for the paths below it that match pat
// (the pattern after its literal base), each named as shownBase/path,
// directories with a trailing /, those git ignores only withIgnored. truncated: the walk stopped at its entry
// limit.
func (t *Glob) match(ctx context.Context, r *os.Root, hide *hider, withIgnored bool, start, shownBase, pat string) (matches []string, truncated bool, err error) {
	// Without **, nothing deeper than the pattern's own depth can match.
	depth := -1
	if !strings.Contains(pat, "**") {
		depth = strings.Count(pat, "/") + 1
	}
	truncated, err = walk(ctx, r, start, t.lim.WalkEntries, hide, withIgnored, func(p string, d fs.DirEntry) error {
		if p == start {
			return nil
		}
		sub := p
		if start != "." {
			sub = strings.TrimPrefix(p, start+"/")
		}
		if doublestar.MatchUnvalidated(pat, sub) {
			shown := path.Join(shownBase, sub)
			if d.IsDir() {
				shown += "/"
			}
			matches = append(matches, shown)
		}
		if d.IsDir() && depth > 0 && strings.Count(sub, "/")+1 >= depth {
			return fs.SkipDir
		}
		return nil
	})
	return matches, truncated, err
}

// list is the sorted matches, at most GlobResults of them, with notes
// when some are not shown or the walk stopped early, each saying what to
// do about it.
func (t *Glob) list(matches []string, truncated bool) string {
	slices.Sort(matches)
	var out strings.Builder
	for i, m := range matches {
		if i == t.lim.GlobResults {
			fmt.Fprintf(&out, "[%d more paths not shown (%d in all); use a more specific pattern]\n", len(matches)-i, len(matches))
			break
		}
		out.WriteString(m)
		out.WriteByte('\n')
	}
	if truncated {
		fmt.Fprintf(&out, "[stopped after visiting %d entries, so the list may be incomplete; use a more specific pattern]\n", t.lim.WalkEntries)
	}
	return out.String()
}

// unescape removes glob escapes (\* for a literal *) from a pattern's
// literal base, giving the path it names.
func unescape(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
