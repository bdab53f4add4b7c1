package fstool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Grep is the grep tool.
type Grep struct{ confined }

// NewGrep returns grep confined to ws.
func NewGrep(ws *Workspace, lim Limits) *Grep {
	return &Grep{confine(ws, lim)}
}

// grepLineChars caps one result line: a match in a minified file must not
// flood the result.
const grepLineChars = 300

// Spec implements tool.Tool.
func (t *Grep) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "grep",
		Description: fmt.Sprintf("Search file contents with a regular expression (Go RE2 syntax: no "+
			"backreferences or lookaround; use (?i) for case-insensitive). Searches every file under path "+
			"(default: the whole workspace), skipping binary files, files over %s, .git and .deputy "+
			"directories, and what git ignores (.gitignore files, .git/info/exclude) unless include_ignored "+
			"is true or path names an ignored file or directory, without following symlinks. Each result "+
			"is `file:line: text`. At most %d matching lines are listed.",
			sizeText(t.lim.MaxFileBytes), t.lim.GrepResults),
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Regular expression (Go RE2 syntax) matched against each line."},
    "path": {"type": "string", "minLength": 1, "description": "File or directory to search, relative to the workspace root. Default: the workspace root."},
    "include_ignored": {"type": "boolean", "description": "Also search files that .gitignore or .git/info/exclude ignore (build output, dependencies). Default false."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (t *Grep) ReadOnly() bool { return true }

type grepState struct {
	out        strings.Builder
	matches    int
	full       bool // the result cap is reached; the rest is only counted
	binary     int
	large      int
	unreadable int
}

// Run implements tool.Tool.
func (t *Grep) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Pattern        string `json:"pattern"`
		Path           string `json:"path"`
		IncludeIgnored bool   `json:"include_ignored"`
	}](input)
	if err != nil {
		return "", err
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return "", fmt.Errorf("invalid regular expression: %v", err)
	}
	where := in.Path
	if where == "" {
		where = "."
	}
	r, start, hide, err := t.ws.openPath(where)
	if err != nil {
		return "", err
	}
	defer r.Close()
	start = display(start)
	fi, err := r.Stat(start)
	if err != nil {
		return "", t.ws.pathErr(where, err)
	}
	// Results name files as the model would: through the path it gave.
	shownBase, _ := t.ws.lexical(where)
	g := &grepRun{t: t, r: r, hide: hide, re: re, where: where, start: start, shownBase: display(shownBase),
		withIgnored: in.IncludeIgnored}
	truncated := false
	if fi.IsDir() {
		truncated, err = g.searchTree(ctx)
	} else {
		err = g.searchFile(ctx, fi)
	}
	if err != nil {
		return "", err
	}
	return t.report(&g.st, in.Pattern, where, truncated), nil
}

// grepRun is one grep call's search: where it starts, how its results
// name files, and what it found so far.
type grepRun struct {
	t         *Grep
	r         *os.Root
	hide      *hider
	re        *regexp.Regexp
	where     string // the path as the model gave it
	start     string // resolved, relative to r
	shownBase string // where, cleaned: the start of every name shown
	// withIgnored: files git ignores are searched too.
	withIgnored bool
	st          grepState
}

// shown is how the results name p, a path under start: through the path
// the model gave.
func (g *grepRun) shown(p string) string {
	if p == g.start {
		return g.shownBase
	}
	sub := p
	if g.start != "." {
		sub = strings.TrimPrefix(p, g.start+"/")
	}
	if g.shownBase == "." {
		return sub
	}
	return g.shownBase + "/" + sub
}

// searchFile searches the one file the model named. Unlike a file met in
// a walk, one that cannot be searched is an error that says why.
func (g *grepRun) searchFile(ctx context.Context, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", g.where, fi.Mode().Type())
	}
	if fi.Size() > g.t.lim.MaxFileBytes {
		return fmt.Errorf("%s is %d bytes, more than grep searches (%d)", g.where, fi.Size(), g.t.lim.MaxFileBytes)
	}
	bin, err := g.t.grepFile(ctx, g.r, g.hide, g.start, g.shownBase, g.re, &g.st)
	var he *HiddenError
	if errors.As(err, &he) {
		he.Path = g.where
		return he
	}
	if err != nil {
		return g.t.ws.pathErr(g.where, err)
	}
	if bin {
		return fmt.Errorf("%s is a binary file; grep searches text only", g.where)
	}
	return nil
}

// searchTree searches every regular file under the directory start.
// truncated: the walk stopped at its entry limit.
func (g *grepRun) searchTree(ctx context.Context) (truncated bool, err error) {
	truncated, err = walk(ctx, g.r, g.start, g.t.lim.WalkEntries, g.hide, g.withIgnored, func(p string, d fs.DirEntry) error {
		return g.visit(ctx, p, d)
	})
	if err != nil {
		return false, g.t.ws.pathErr(g.where, err)
	}
	return truncated, nil
}

// visit searches one entry of the walk. A file that cannot be searched
// is counted, by why, for the report, not an error: the rest of the tree
// still is searched.
func (g *grepRun) visit(ctx context.Context, p string, d fs.DirEntry) error {
	if !d.Type().IsRegular() {
		return nil // directories, and symlinks, which are not followed
	}
	info, err := d.Info()
	if err != nil {
		g.st.unreadable++
		return nil
	}
	if info.Size() > g.t.lim.MaxFileBytes {
		g.st.large++
		return nil
	}
	bin, err := g.t.grepFile(ctx, g.r, g.hide, p, g.shown(p), g.re, &g.st)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var he *HiddenError
	switch {
	case errors.As(err, &he):
		// Reached by a directory swapped for a symlink during the
		// walk: as absent as the rest of the hidden path, so not
		// even counted as unreadable.
	case err != nil:
		g.st.unreadable++
	case bin:
		g.st.binary++
	}
	return nil
}

// grepFile adds the matching lines of one file to st. It reports a binary
// file instead of searching it.
func (t *Grep) grepFile(ctx context.Context, r *os.Root, hide *hider, p, name string, re *regexp.Regexp, st *grepState) (binary bool, err error) {
	f, err := r.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := hide.opened(t.ws, f, name); err != nil {
		return false, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if isBinary(head) {
		return true, nil
	}
	// Lines are matched whole (up to the file size cap), then shown cut.
	lr := newLineReader(br, int(min(t.lim.MaxFileBytes, 1<<30)))
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !re.Match(line) {
			continue
		}
		st.matches++
		if st.full {
			continue
		}
		shownLine := line
		if len(line) > grepLineChars {
			shownLine = tool.CutUTF8(line, grepLineChars)
		}
		cut := len(line) - len(shownLine)
		row := fmt.Sprintf("%s:%d: %s\n", name, n, showLine(shownLine, cut))
		if st.matches > t.lim.GrepResults || st.out.Len()+len(row) > t.lim.OutputChars {
			st.full = true
			continue
		}
		st.out.WriteString(row)
	}
}

func (t *Grep) report(st *grepState, pattern, where string, truncated bool) string {
	out := &st.out
	if st.matches == 0 {
		out.Reset()
		fmt.Fprintf(out, "no matches for %q in %s\n", pattern, where)
	}
	if st.full {
		shown := strings.Count(out.String(), "\n")
		fmt.Fprintf(out, "[%d of %d matching lines shown; narrow the pattern or the path to see the rest]\n", shown, st.matches)
	}
	var skipped []string
	if st.binary > 0 {
		skipped = append(skipped, fmt.Sprintf("%d binary", st.binary))
	}
	if st.large > 0 {
		skipped = append(skipped, fmt.Sprintf("%d larger than %s", st.large, sizeText(t.lim.MaxFileBytes)))
	}
	if st.unreadable > 0 {
		skipped = append(skipped, fmt.Sprintf("%d unreadable", st.unreadable))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(out, "[skipped files: %s]\n", strings.Join(skipped, ", "))
	}
	if truncated {
		fmt.Fprintf(out, "[stopped after visiting %d entries, so results may be incomplete; narrow the path]\n", t.lim.WalkEntries)
	}
	return out.String()
}
