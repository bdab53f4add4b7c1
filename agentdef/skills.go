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

// Skill is a Claude Code skill: NAME/SKILL.md with front matter (name,
// description) and instructions as the body, plus any files beside it that
// the instructions refer to. Only skills a definition grants exist for a
// child; the skill tool (later) loads the body and lists Files on demand.
type Skill struct {
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Instructions string         `json:"instructions"`
	Dir          string         `json:"dir"`
	Files        []string       `json:"files,omitempty"` // relative to Dir, sorted, SKILL.md excluded
	Extra        map[string]any `json:"extra,omitempty"`
	File         string         `json:"file"` // the SKILL.md
}

// ProjectSkillDirs are a project's skill roots in precedence order.
func ProjectSkillDirs(project string) []string {
	return []string{filepath.Join(project, ".deputy", "skills"), filepath.Join(project, ".claude", "skills")}
}

// maxSkillFiles bounds the listing of one skill's directory.
const maxSkillFiles = 1000

// ParseSkill reads one SKILL.md. The name defaults to the directory's
// name, as Claude Code does; a description is required because it is all
// the child sees before loading the skill.
func ParseSkill(file string, data []byte) (*Skill, []Issue, []Issue) {
	fm, ok := splitFrontMatter(file, data)
	if !ok {
		return nil, fm.errs, fm.warns
	}
	errs, warns := fm.errs, fm.warns
	s := &Skill{File: file, Dir: filepath.Dir(file), Instructions: fm.body}
	for k, v := range fm.fields {
		var err error
		switch k {
		case "name":
			s.Name, err = asString(v)
		case "description":
			s.Description, err = asString(v)
		default:
			if s.Extra == nil {
				s.Extra = map[string]any{}
			}
			s.Extra[k] = v
		}
		if err != nil {
			errs = append(errs, Issue{File: file, Line: keyLineOr1(fm.lineOf, k), Msg: k + ": " + err.Error()})
		}
	}
	s.Name, s.Description = strings.TrimSpace(s.Name), strings.TrimSpace(s.Description)
	if s.Name == "" {
		s.Name = filepath.Base(s.Dir)
	}
	if !validName.MatchString(s.Name) {
		errs = append(errs, Issue{File: file, Line: keyLineOr1(fm.lineOf, "name"), Msg: fmt.Sprintf("name: %q is not a valid name", s.Name)})
	}
	if s.Description == "" {
		errs = append(errs, Issue{File: file, Line: keyLineOr1(fm.lineOf, "description"), Msg: "description: missing: a child chooses skills by their description"})
	}
	if len(errs) > 0 {
		return nil, errs, warns
	}
	return s, nil, warns
}

// LoadSkills reads NAME/SKILL.md under each root, highest precedence
// first (a later root's skill with a taken name is shadowed, not an
// error; within one root names are unique by directory, but a front-matter
// name that repeats another directory's is an error). A bad skill never
// stops the others. Missing roots are skipped.
func LoadSkills(roots ...string) (map[string]*Skill, []Issue, []Issue) {
	out := map[string]*Skill{}
	var errs, warns []Issue
	for _, root := range roots {
		ents, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, Issue{File: root, Msg: err.Error()})
			continue
		}
		inRoot := map[string]string{}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(root, e.Name())
			file := filepath.Join(dir, "SKILL.md")
			data, err := readLimited(file, maxDefinitionFile)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a directory that is not a skill
			}
			if err != nil {
				errs = append(errs, Issue{File: file, Msg: err.Error()})
				continue
			}
			s, e2, w := ParseSkill(file, data)
			errs, warns = append(errs, e2...), append(warns, w...)
			if s == nil {
				continue
			}
			if first, dup := inRoot[s.Name]; dup {
				errs = append(errs, Issue{File: file, Msg: fmt.Sprintf("duplicate skill name %q: also defined in %s", s.Name, first)})
				continue
			}
			inRoot[s.Name] = file
			if _, shadowed := out[s.Name]; shadowed {
				continue
			}
			if s.Files, err = listSkillFiles(dir); err != nil {
				warns = append(warns, Issue{File: file, Msg: "listing its files: " + err.Error()})
			}
			out[s.Name] = s
		}
	}
	return out, errs, warns
}

// GrantedSkills picks the skills a definition names; names not found are
// returned so the caller can report them.
func GrantedSkills(all map[string]*Skill, names []string) (granted []*Skill, missing []string) {
	for _, n := range names {
		if s, ok := all[n]; ok {
			granted = append(granted, s)
		} else {
			missing = append(missing, n)
		}
	}
	return granted, missing
}

func listSkillFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "SKILL.md" {
			return nil
		}
		if len(files) >= maxSkillFiles {
			return fmt.Errorf("more than %d files; listing cut", maxSkillFiles)
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(files)
	return files, err
}

func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("file is larger than %d bytes", max)
	}
	return data, err
}
