package hook

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/deputy-run/deputy/internal/yamlpos"
)

// maxFrontMatterBytes bounds the front matter FromMarkdown parses, as
// agentdef bounds it (goccy's parser is slow on some big inputs).
const maxFrontMatterBytes = 256 << 10

// FromMarkdown reads the hooks of a definition file (Markdown with YAML
// front matter between --- lines, as agentdef reads it) with the line of
// every entry, so each skipped entry is reported at its own file:line.
// A file without front matter or without a hooks key has no hooks. Use
// FromFrontMatter where only agentdef's decoded value is at hand (a
// definition from the database).
func FromMarkdown(file string, src []byte) (*Config, error) {
	empty := &Config{groups: map[Event][]Group{}, Files: []string{file}}
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		return empty, nil
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, &ConfigError{File: file, Line: 1, Err: errors.New("front matter is not closed by a --- line")}
	}
	fm := strings.Join(lines[1:end], "\n")
	if len(fm) > maxFrontMatterBytes {
		return nil, &ConfigError{File: file, Line: 2, Err: fmt.Errorf("front matter is %d bytes; at most %d", len(fm), maxFrontMatterBytes)}
	}
	const first = 2 // the file line of the front matter's first line
	f, err := yamlpos.Parse([]byte(fm), nil)
	if err != nil {
		pos, msg := yamlpos.OfError(err)
		return nil, &ConfigError{File: file, Line: pos.Line + first - 1, Err: fmt.Errorf("front matter: %s", msg)}
	}
	if yamlpos.CountAliases(f) > 0 {
		return nil, &ConfigError{File: file, Line: first, Err: errors.New("front matter: YAML aliases are not read in hooks files")}
	}
	if len(f.Docs) == 0 || f.Docs[0] == nil {
		return empty, nil
	}
	pairs, ok := yamlpos.Pairs(f.Docs[0].Body)
	if !ok {
		return empty, nil // agentdef reports a front matter that is not a mapping
	}
	for _, kv := range pairs {
		if yamlpos.Key(kv) != "hooks" || kv.Value == nil {
			continue
		}
		keyLine := yamlpos.Of(kv.Key).Line + first - 1
		var v any
		if err := yaml.NodeToValue(kv.Value, &v); err != nil {
			pos, msg := yamlpos.OfError(err)
			return nil, &ConfigError{File: file, Line: max(pos.Line+first-1, keyLine), Err: errors.New(msg)}
		}
		if _, null := kv.Value.(*ast.NullNode); null {
			return empty, nil
		}
		at := map[string]int{"": keyLine}
		yamlLines(kv.Value, "", first-1, at)
		c := &Config{groups: map[Event][]Group{}, Files: []string{file}}
		line := func(path string) int {
			for {
				if l, ok := at[path]; ok {
					return l
				}
				i := strings.LastIndexAny(path, ".[")
				if i < 0 {
					return keyLine
				}
				path = path[:i]
			}
		}
		if err := c.read(file, v, line); err != nil {
			return nil, err
		}
		return c, nil
	}
	return empty, nil
}

// yamlLines records the file line of every value under n by its path
// (a mapping entry at its key's line), offset added to the front matter's
// own line numbers.
func yamlLines(n ast.Node, path string, offset int, at map[string]int) {
	if n == nil {
		return
	}
	if pairs, ok := yamlpos.Pairs(n); ok {
		for _, kv := range pairs {
			if kv == nil {
				continue
			}
			p := joinPath(path, yamlpos.Key(kv))
			if l := yamlpos.Of(kv.Key).Line; l > 0 {
				at[p] = l + offset
			}
			yamlLines(kv.Value, p, offset, at)
		}
		return
	}
	if s, ok := n.(*ast.SequenceNode); ok {
		for i, v := range s.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			if l := yamlpos.Of(v).Line; l > 0 {
				at[p] = l + offset
			}
			yamlLines(v, p, offset, at)
		}
	}
}
