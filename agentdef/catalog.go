package agentdef

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LoadOptions says where the catalog looks for definition files.
type LoadOptions struct {
	// ProjectDir is the project root: its .deputy/agents/*.md and
	// .claude/agents/*.md are loaded (.deputy first). Empty: none.
	ProjectDir string
	// UserDir is the user's agents directory, usually ~/.deputy/agents
	// (see UserAgentsDir). Empty: none.
	UserDir string
	// NoBuiltins leaves the built-in definitions out.
	NoBuiltins bool
}

// ProjectAgentDirs are the directories a project's definitions live in,
// in the order they are read.
func ProjectAgentDirs(project string) []string {
	return []string{filepath.Join(project, ".deputy", "agents"), filepath.Join(project, ".claude", "agents")}
}

// UserAgentsDir is ~/.deputy/agents.
func UserAgentsDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("user agents dir: %w", err)
	}
	return filepath.Join(home, ".deputy", "agents"), nil
}

// LoadResult is what loading found, file by file, in the order read.
type LoadResult struct {
	Files []Parsed `json:"files"`
	// Errors not tied to one definition file (an unreadable directory).
	Errors []Issue `json:"errors,omitempty"`
}

// Loaded counts the files that gave a definition.
func (r *LoadResult) Loaded() int {
	n := 0
	for _, f := range r.Files {
		if f.Def != nil {
			n++
		}
	}
	return n
}

// Issues returns every error then every warning, each as file:line: msg.
func (r *LoadResult) Issues() (errs, warnings []Issue) {
	errs = append(errs, r.Errors...)
	for _, f := range r.Files {
		errs = append(errs, f.Errors...)
		warnings = append(warnings, f.Warnings...)
	}
	return errs, warnings
}

// Catalog is the set of definitions a parent can spawn, each name resolved
// to its highest-precedence source. It is immutable; With derives a new one.
type Catalog struct {
	defs map[string]*Definition
}

// Load builds the catalog from built-ins, user files and project files.
// One bad file never stops the others: it is reported in the result and
// left out. Two files of one level defining the same name are an error on
// the second, naming the first.
func Load(opts LoadOptions) (*Catalog, *LoadResult) {
	c := &Catalog{defs: map[string]*Definition{}}
	res := &LoadResult{}
	if !opts.NoBuiltins {
		for _, d := range Builtins() {
			c.defs[d.Name] = d
		}
	}
	// Lower levels first, so a higher level overwrites.
	if opts.UserDir != "" {
		c.addLevel(LevelUser, []string{opts.UserDir}, res)
	}
	if opts.ProjectDir != "" {
		c.addLevel(LevelProject, ProjectAgentDirs(opts.ProjectDir), res)
	}
	return c, res
}

func (c *Catalog) addLevel(level Level, dirs []string, res *LoadResult) {
	seen := map[string]*Definition{}
	for _, dir := range dirs {
		files, err := mdFiles(dir, false)
		if err != nil {
			res.Errors = append(res.Errors, Issue{File: dir, Msg: err.Error()})
			continue
		}
		for _, f := range files {
			p := parseFile(f)
			if p.Def != nil {
				p.Def.Source.Level = level
				if first, dup := seen[p.Def.Name]; dup {
					p.Errors = append(p.Errors, Issue{File: f, Line: p.Def.Source.Line, Msg: fmt.Sprintf(
						"duplicate name %q: also defined in %s:%d", p.Def.Name, first.Source.File, first.Source.Line)})
					p.Def = nil
				} else {
					seen[p.Def.Name] = p.Def
					c.defs[p.Def.Name] = p.Def
				}
			}
			res.Files = append(res.Files, p)
		}
	}
}

// ParsePaths parses definition files given as files or directories
// (searched recursively for *.md), each on its own: it is the checker
// behind `deputy agents validate PATH...`. Names repeated across the paths
// are warnings, not errors, because the files are not one catalog level
// (collections namespace agents by plugin).
func ParsePaths(paths []string) *LoadResult {
	res := &LoadResult{}
	seen := map[string]*Definition{}
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			res.Errors = append(res.Errors, Issue{File: path, Msg: err.Error()})
			continue
		}
		files := []string{path}
		if st.IsDir() {
			if files, err = mdFiles(path, true); err != nil {
				res.Errors = append(res.Errors, Issue{File: path, Msg: err.Error()})
				continue
			}
		}
		for _, f := range files {
			p := parseFile(f)
			if p.Def != nil {
				if first, dup := seen[p.Def.Name]; dup {
					p.Warnings = append(p.Warnings, Issue{File: f, Line: p.Def.Source.Line, Msg: fmt.Sprintf(
						"name %q is also defined in %s:%d", p.Def.Name, first.Source.File, first.Source.Line)})
				} else {
					seen[p.Def.Name] = p.Def
				}
			}
			res.Files = append(res.Files, p)
		}
	}
	return res
}

// maxDefinitionFile bounds what is read of one file.
const maxDefinitionFile = 4 << 20

func parseFile(path string) Parsed {
	f, err := os.Open(path)
	if err != nil {
		return Parsed{File: path, Errors: []Issue{{File: path, Msg: err.Error()}}}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDefinitionFile+1))
	if err == nil && len(data) > maxDefinitionFile {
		err = fmt.Errorf("file is larger than %d bytes", maxDefinitionFile)
	}
	if err != nil {
		return Parsed{File: path, Errors: []Issue{{File: path, Msg: err.Error()}}}
	}
	return ParseDefinition(path, data)
}

// mdFiles lists *.md files in dir, sorted; a missing dir has none.
func mdFiles(dir string, recursive bool) ([]string, error) {
	var out []string
	if !recursive {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
		return out, nil
	}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Lookup returns a copy of the definition called name.
func (c *Catalog) Lookup(name string) (*Definition, bool) {
	d, ok := c.defs[name]
	if !ok {
		return nil, false
	}
	return d.Clone(), true
}

// List returns copies of every definition, sorted by name.
func (c *Catalog) List() []*Definition {
	out := make([]*Definition, 0, len(c.defs))
	for _, d := range c.defs {
		out = append(out, d.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Merge returns a catalog with defs added at level: each replaces a
// definition of the same name from a lower level and yields to one from a
// higher level. Each is checked; an invalid one is left out and reported.
// The database's definitions come in this way, again at each refresh.
func (c *Catalog) Merge(level Level, defs []*Definition) (*Catalog, []error) {
	n := &Catalog{defs: make(map[string]*Definition, len(c.defs)+len(defs))}
	for k, v := range c.defs {
		n.defs[k] = v
	}
	var errs []error
	for _, v := range defs {
		d := v.Clone()
		d.Source.Level = level
		if err := d.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if have, ok := n.defs[d.Name]; ok && have.Source.Level > level {
			continue
		}
		n.defs[d.Name] = d
	}
	return n, errs
}

// With returns a catalog with volatile definitions on top: synthesized for
// one spawn, checked like files, and gone with the returned catalog. Two
// volatile definitions with one name, or an invalid one, are an error.
func (c *Catalog) With(volatile ...*Definition) (*Catalog, error) {
	n := &Catalog{defs: make(map[string]*Definition, len(c.defs)+len(volatile))}
	for k, v := range c.defs {
		n.defs[k] = v
	}
	seen := map[string]bool{}
	var errs []error
	for i, v := range volatile {
		if v == nil {
			errs = append(errs, fmt.Errorf("volatile definition %d is nil", i))
			continue
		}
		d := v.Clone()
		d.Source = Source{Level: LevelVolatile}
		if err := d.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("volatile %w", err))
			continue
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("volatile definition %q is given twice", d.Name))
			continue
		}
		seen[d.Name] = true
		n.defs[d.Name] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return n, nil
}

// Describe renders defs as the spawn tool's description lists them: a line
// per type with its description on one line, pinned and fork modes marked.
// Everything that offers the catalog to a model (the spawn tool, the MCP
// server's) renders it here, so they read the same.
func Describe(defs []*Definition) string {
	var b strings.Builder
	for _, d := range defs {
		b.WriteString("- " + d.Name + ": " + Brief(d.Description))
		switch {
		case d.ModePinned:
			b.WriteString(" [mode: " + string(d.Mode) + ", fixed]")
		case d.Mode == ModeFork:
			b.WriteString(" [mode: fork]")
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// oneLine folds a description onto one line and bounds it: the tool's
// description is sent with every request of every instance.
func Brief(s string) string { return OneLine(s, 400) }

// OneLine folds s onto one line (whitespace runs become one space) and
// bounds it to n runes, the last an ellipsis when it was cut: never a split
// UTF-8 sequence. For errors, notes and lists that must stay one line.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
