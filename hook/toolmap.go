package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// A hook sees a tool call as Claude Code would have made it: Claude
// Code's tool name and argument names, file paths absolute (its tools
// take absolute paths, and hooks written for it compare them so). The
// table is deputy's built-in tools against Claude Code's
// (agentdef/toolnames.go maps the names the other way for definition
// files); a tool not in it (a program's, an MCP server's) keeps its name
// and arguments.
type argMap struct {
	deputy, claude string
	path           bool // a file path: absolute for hooks, relative to the workspace back
	ms             bool // deputy's seconds, Claude Code's milliseconds
}

type toolMap struct {
	claude string
	args   []argMap
	// refuse names Claude Code arguments that change what the call does
	// in a way deputy's tool cannot, so an updatedInput setting them
	// fails rather than being run without them.
	refuse []string
}

var toolMaps = map[string]toolMap{
	"bash":       {"Bash", []argMap{{"command", "command", false, false}, {"timeout_s", "timeout", false, true}}, []string{"run_in_background"}},
	"read_file":  {"Read", []argMap{{"path", "file_path", true, false}, {"offset", "offset", false, false}, {"limit", "limit", false, false}}, nil},
	"write_file": {"Write", []argMap{{"path", "file_path", true, false}, {"content", "content", false, false}}, nil},
	"edit_file":  {"Edit", []argMap{{"path", "file_path", true, false}, {"old", "old_string", false, false}, {"new", "new_string", false, false}}, []string{"replace_all"}},
	"glob":       {"Glob", []argMap{{"pattern", "pattern", false, false}, {"include_ignored", "include_ignored", false, false}}, nil},
	"grep":       {"Grep", []argMap{{"pattern", "pattern", false, false}, {"path", "path", true, false}, {"include_ignored", "include_ignored", false, false}}, nil},
	"web_fetch":  {"WebFetch", []argMap{{"url", "url", false, false}}, nil},
	"web_search": {"WebSearch", []argMap{{"query", "query", false, false}}, nil},
	"spawn_subagent": {"Task", []argMap{{"subagent_type", "subagent_type", false, false}, {"task", "prompt", false, false},
		{"description", "description", false, false}}, nil},
	"skill": {"Skill", []argMap{{"name", "skill", false, false}}, nil},
}

// ClaudeName is Claude Code's name for one of deputy's tools: Read for
// read_file, Bash for bash; any other name (MCP tools, a program's) as is.
func ClaudeName(deputy string) string {
	if m, ok := toolMaps[deputy]; ok {
		return m.claude
	}
	return deputy
}

// DeputyName is deputy's name for a tool as Claude Code names it (the
// inverse of ClaudeName; Agent, Claude Code's newer name for Task, is
// spawn_subagent too). A name that is neither comes back as is.
func DeputyName(claude string) string {
	if claude == "Agent" {
		return "spawn_subagent"
	}
	for d, m := range toolMaps {
		if m.claude == claude {
			return d
		}
	}
	return claude
}

// ToClaude gives a deputy tool call as a hook sees it: Claude Code's tool
// name and arguments (read_file{path} → Read{file_path}, bash{command,
// timeout_s} → Bash{command, timeout in ms}), paths made absolute against
// dir (unless dir is empty), the arguments in their order. Arguments the
// table does not know are kept under their own names; a tool it does not
// know comes back unchanged.
func ToClaude(name string, input json.RawMessage, dir string) (string, json.RawMessage, error) {
	m, ok := toolMaps[name]
	if !ok {
		return name, input, nil
	}
	kvs, err := members(input)
	if err != nil {
		return "", nil, fmt.Errorf("%s arguments: %w", name, err)
	}
	var out object
	for _, kv := range kvs {
		a, ok := m.find(kv.key, false)
		if !ok {
			out.add(kv.key, kv.val)
			continue
		}
		v := kv.val
		switch {
		case a.path && dir != "":
			var p string
			if json.Unmarshal(v, &p) == nil && p != "" && !filepath.IsAbs(p) {
				v = mustJSON(filepath.Join(dir, p))
			}
		case a.ms:
			var s float64
			if json.Unmarshal(v, &s) == nil {
				v = mustJSON(int64(s * 1000))
			}
		}
		out.add(a.claude, v)
	}
	return m.claude, out.bytes(), nil
}

// FromClaude turns a call written in Claude Code's terms (a hook's
// updatedInput) back into deputy's: name may be either tool name; paths
// inside dir become relative to it; Bash's timeout in ms becomes
// timeout_s (rounded up); Claude Code arguments deputy's tool has no
// field for and that change nothing it does (Bash's description, Grep's
// output_mode ...) are dropped, while those that would change the call
// (Edit's replace_all: true, Bash's run_in_background: true) are an
// error, since running the call without them is not what the hook asked.
func FromClaude(name string, input json.RawMessage, dir string) (string, json.RawMessage, error) {
	d := DeputyName(name)
	m, ok := toolMaps[d]
	if !ok {
		return name, input, nil
	}
	kvs, err := members(input)
	if err != nil {
		return "", nil, fmt.Errorf("%s arguments: %w", name, err)
	}
	var out object
	for _, kv := range kvs {
		a, ok := m.find(kv.key, true)
		if !ok {
			if bytes.Equal(bytes.TrimSpace(kv.val), []byte("true")) && contains(m.refuse, kv.key) {
				return "", nil, fmt.Errorf("%s: %s %s is not something deputy's %s can do", m.claude, kv.key, kv.val, d)
			}
			continue
		}
		v := kv.val
		switch {
		case a.path && dir != "":
			var p string
			if json.Unmarshal(v, &p) == nil && filepath.IsAbs(p) {
				if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					v = mustJSON(rel)
				}
			}
		case a.ms:
			var ms float64
			if err := json.Unmarshal(v, &ms); err != nil || ms < 0 || ms > math.MaxInt32*1000.0 {
				return "", nil, fmt.Errorf("%s: timeout %s is not a number of milliseconds", m.claude, v)
			}
			v = mustJSON(int64(math.Ceil(ms / 1000)))
		}
		out.add(a.deputy, v)
	}
	return d, out.bytes(), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// find looks an argument up by its Claude Code name (claude true) or
// deputy's. Going back, deputy's own names are accepted too, so a hook
// may write either.
func (m *toolMap) find(key string, claude bool) (argMap, bool) {
	for _, a := range m.args {
		if !claude && a.deputy == key || claude && (a.claude == key || a.deputy == key) {
			return a, true
		}
	}
	return argMap{}, false
}

type member struct {
	key string
	val json.RawMessage
}

// members reads a JSON object's members in order. Empty input is an
// empty object.
func members(input json.RawMessage) ([]member, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// object writes a JSON object with members in the order added.
type object struct{ b bytes.Buffer }

func (o *object) add(k string, v json.RawMessage) {
	if o.b.Len() == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.b.Write(mustJSON(k))
	o.b.WriteByte(':')
	o.b.Write(v)
}

func (o *object) bytes() json.RawMessage {
	if o.b.Len() == 0 {
		return json.RawMessage("{}")
	}
	o.b.WriteByte('}')
	return json.RawMessage(o.b.Bytes())
}

func mustJSON(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic(err) // only strings and numbers are given
	}
	return b
}

// marshal is json.Marshal without the HTML escaping of <, > and &: hooks
// read this JSON with grep and sed, and Claude Code's (JavaScript's) JSON
// writes `2>&1` as it is.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
