package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// snake is the one key style of every --json.
var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// dataKeys hold what the user or a model wrote (a tool call's input, a
// definition's extra fields, an event's data): their keys are not deputy's.
var dataKeys = map[string]bool{"input": true, "raw": true, "data": true, "extra": true, "definition": true}

// badKeys lists the keys of v, at any depth, that are not snake_case.
func badKeys(v any, path string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !snake.MatchString(k) {
				*out = append(*out, path+"."+k)
			}
			if !dataKeys[k] {
				badKeys(x, path+"."+k, out)
			}
		}
	case []any:
		for _, x := range v {
			badKeys(x, path+"[]", out)
		}
	}
}

// Every command's --json speaks snake_case, down to the nested records
// (instances, usage, transcripts, transitions, definitions, doctor's
// checks). The commands are found in the CLI itself: one with a --json
// flag that this test does not run fails it.
func TestEveryJSONIsSnakeCase(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	writeFile(t, filepath.Join(ws, ".deputy", "agents", "helper.md"), "---\nname: helper\ndescription: Helps.\n"+
		"tools: Read, mcp__gh__get_issue\nmcpServers:\n  gh:\n    command: gh-mcp\n    args: [serve]\nargument-hint: x\n---\nYou help.\n")
	queued, _, _ := deputy(t, ws, nil, "run", "--model", "fake", "--detach", "later")
	queued = strings.TrimSpace(queued)
	// In this order: the controls on the queued root before cancel and
	// before a run (whose engine would start the queued root), rm last.
	order := []string{"show", "ps", "tree", "logs", "agents list", "workers", "doctor", "send", "pause", "resume",
		"answer", "approve", "deny", "cancel", "run", "prune", "rm"}
	runs := map[string][]string{
		"run":         {"run", "--model", "fake", "--json", "-q", "count"},
		"show":        {"show", "--json", id},
		"ps":          {"ps", "--all", "--json"},
		"tree":        {"tree", "--json", id},
		"logs":        {"logs", "--json", id},
		"agents list": {"agents", "list", "--json"},
		"workers":     {"workers", "--all", "--json"},
		"doctor":      {"doctor", "--json"},
		"send":        {"send", "--json", queued, "hello"},
		"pause":       {"pause", "--json", queued},
		"resume":      {"resume", "--json", queued},
		"answer":      {"answer", "--json", queued, "x"},
		"approve":     {"approve", "--json", queued},
		"deny":        {"deny", "--json", queued},
		"cancel":      {"cancel", "--json", queued},
		"prune":       {"prune", "--json", "--dry-run", "--before", justAfterTree(t, ws, id)},
		"rm":          {"rm", "--json", id},
	}
	// A queued root is neither running nor asking, nor waits for approval.
	refused := map[string]bool{"pause": true, "resume": true, "answer": true, "approve": true, "deny": true}
	var have []string
	walkCommands(newRoot(os.Stdout, os.Stderr), func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil {
			have = append(have, strings.TrimPrefix(c.CommandPath(), "deputy "))
		}
	})
	for _, name := range have {
		if _, ok := runs[name]; !ok {
			t.Errorf("%s has --json and this test does not run it", name)
		}
	}
	if len(order) != len(runs) {
		t.Fatalf("order lists %d commands, runs %d", len(order), len(runs))
	}
	for _, name := range order {
		out, errOut, code := deputy(t, ws, nil, runs[name]...)
		if refused[name] {
			continue // their JSON's keys are controlJSON's, as cancel's
		}
		if code != 0 {
			t.Errorf("%s: exit %d\n%s", name, code, errOut)
			continue
		}
		for _, line := range jsonValues(t, name, out) {
			var bad []string
			badKeys(line, "", &bad)
			if len(bad) > 0 {
				t.Errorf("%s --json: keys not in snake_case: %v", name, bad)
			}
		}
	}
	// What may print nothing here (no workers on SQLite): the types.
	for _, v := range []any{workerJSON{}, controlJSON{}, removedJSON{}, pruneJSON{}, itemJSON{}, runResult{}, treeNode{}, permsReport{}} {
		for _, k := range jsonTags(reflect.TypeOf(v), map[reflect.Type]bool{}) {
			if !snake.MatchString(k) {
				t.Errorf("%T: key %q is not snake_case", v, k)
			}
		}
	}
}

// jsonValues decodes out: one JSON value, or one per line (logs).
func jsonValues(t *testing.T, name, out string) []any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err == nil {
		return []any{v}
	}
	var vs []any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s --json is not JSON: %v\n%s", name, err, out)
		}
		vs = append(vs, v)
	}
	return vs
}

// jsonTags lists the JSON keys of struct type t and of the structs in it
// (each once: a tree's nodes hold nodes).
func jsonTags(t reflect.Type, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() == "time" || seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" && !f.Anonymous {
			name = f.Name
		}
		if name != "" {
			out = append(out, name)
		}
		if !dataKeys[name] {
			out = append(out, jsonTags(f.Type, seen)...)
		}
	}
	return out
}

// walkCommands calls fn on c and every command under it.
func walkCommands(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, fn)
	}
}
