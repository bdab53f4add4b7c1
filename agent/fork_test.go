package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"pgregory.net/rapid"
)

// forkParent is a realistic parent transcript: a task, a read with its
// result (which carries an opaque thinking block), then the spawning turn.
func forkParent(last ...llm.Block) []llm.Message {
	return []llm.Message{
		llm.UserText("audit the repo"),
		{Role: llm.Assistant, Content: []llm.Block{
			llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"c2ln"}`)),
			llm.ToolUse("t1", "read", json.RawMessage(`{"path":"go.mod","z":1,"a":2}`)),
		}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "module x", false)}},
		{Role: llm.Assistant, Content: last},
	}
}

// deepCopy snapshots a transcript through JSON so later comparisons catch
// any write into the parent's arrays.
func deepCopy(t *testing.T, ms []llm.Message) []byte {
	t.Helper()
	b, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestForkTranscriptSiblingsAndText(t *testing.T) {
	t.Parallel()
	parent := forkParent(
		llm.Text("I'll split this."),
		llm.ToolUse("s0", "grep", json.RawMessage(`{"q":"x"}`)),
		llm.ToolUse("spawn1", "spawn_subagent", json.RawMessage(`{"task":"t"}`)),
		llm.ToolUse("s2", "read", json.RawMessage(`{"path":"a"}`)),
		llm.ToolUse("s3", "spawn_subagent", json.RawMessage(`{"task":"other"}`)),
	)
	before := deepCopy(t, parent)

	child, err := ForkTranscript(parent, "spawn1", "check the tests")
	if err != nil {
		t.Fatal(err)
	}
	if got := deepCopy(t, parent); !bytes.Equal(got, before) {
		t.Fatalf("parent changed:\n%s\n%s", before, got)
	}
	if len(child) != len(parent)+1 {
		t.Fatalf("child has %d messages, want %d", len(child), len(parent)+1)
	}

	// Byte-identical prefix: everything before the spawning turn, and the
	// serialized child starts with the parent's bytes up to that cut.
	cut := len(parent) - 1
	pb, cb := deepCopy(t, parent[:cut]), deepCopy(t, child[:cut])
	if !bytes.Equal(pb, cb) {
		t.Fatalf("prefix differs:\n%s\n%s", pb, cb)
	}
	whole := deepCopy(t, child)
	if !bytes.HasPrefix(whole, pb[:len(pb)-1]) { // drop the closing ']'
		t.Fatal("serialized child does not start with the parent's prefix bytes")
	}

	wantAsst := llm.Message{Role: llm.Assistant, Content: []llm.Block{
		llm.Text("I'll split this."),
		llm.ToolUse("s0", "grep", json.RawMessage(`{"q":"x"}`)),
		llm.ToolUse("s2", "read", json.RawMessage(`{"path":"a"}`)),
		llm.ToolUse("s3", "spawn_subagent", json.RawMessage(`{"task":"other"}`)),
	}}
	if !reflect.DeepEqual(child[cut], wantAsst) {
		t.Fatalf("spawning turn = %+v\nwant %+v", child[cut], wantAsst)
	}
	wantUser := llm.Message{Role: llm.User, Content: []llm.Block{
		llm.ToolResult("s0", ForkPlaceholder, false),
		llm.ToolResult("s2", ForkPlaceholder, false),
		llm.ToolResult("s3", ForkPlaceholder, false),
		llm.Text("check the tests"),
	}}
	if !reflect.DeepEqual(child[cut+1], wantUser) {
		t.Fatalf("task turn = %+v\nwant %+v", child[cut+1], wantUser)
	}

	// The child's slices are its own: appending to them must not reach the parent.
	child[cut].Content[0].Text = "mutated"
	child = append(child[:1], llm.UserText("x"))
	_ = child
	if got := deepCopy(t, parent); !bytes.Equal(got, before) {
		t.Fatal("writing to the child changed the parent")
	}
}

func TestForkTranscriptTextOnlyLeft(t *testing.T) {
	t.Parallel()
	parent := forkParent(llm.Text("delegating"), llm.ToolUse("sp", "task", json.RawMessage(`{}`)))
	child, err := ForkTranscript(parent, "sp", "do it")
	if err != nil {
		t.Fatal(err)
	}
	n := len(parent)
	if len(child) != n+1 || child[n-1].Text() != "delegating" || len(child[n-1].Content) != 1 {
		t.Fatalf("child = %+v", child)
	}
	if !reflect.DeepEqual(child[n], llm.UserText("do it")) {
		t.Fatalf("task turn = %+v", child[n])
	}
}

func TestForkTranscriptLoneSpawn(t *testing.T) {
	t.Parallel()
	parent := forkParent(llm.ToolUse("sp", "spawn_subagent", json.RawMessage(`{"task":"t"}`)))
	before := deepCopy(t, parent)
	child, err := ForkTranscript(parent, "sp", "the task")
	if err != nil {
		t.Fatal(err)
	}
	if got := deepCopy(t, parent); !bytes.Equal(got, before) {
		t.Fatal("parent changed")
	}
	// The spawning turn is gone; the task ends the previous user message.
	if len(child) != len(parent)-1 {
		t.Fatalf("child has %d messages, want %d", len(child), len(parent)-1)
	}
	if pb, cb := deepCopy(t, parent[:2]), deepCopy(t, child[:2]); !bytes.Equal(pb, cb) {
		t.Fatal("prefix differs")
	}
	want := llm.Message{Role: llm.User, Content: []llm.Block{
		llm.ToolResult("t1", "module x", false),
		llm.Text("the task"),
	}}
	if !reflect.DeepEqual(child[2], want) {
		t.Fatalf("last = %+v, want %+v", child[2], want)
	}
	// The extended message's bytes start like the parent's message did.
	pm, cm := deepCopy(t, parent[:3]), deepCopy(t, child)
	if !bytes.HasPrefix(cm, pm[:len(pm)-4]) { // drop `}]}]`
		t.Fatalf("extended message does not keep the parent's bytes:\n%s\n%s", pm, cm)
	}
	// Writing to the child's last message leaves the parent's array alone.
	child[2].Content[0].Text = "x"
	if got := deepCopy(t, parent); !bytes.Equal(got, before) {
		t.Fatal("writing to the child changed the parent")
	}
}

func TestForkTranscriptLoneSpawnFirstTurn(t *testing.T) {
	t.Parallel()
	parent := []llm.Message{{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("sp", "task", json.RawMessage(`{}`))}}}
	child, err := ForkTranscript(parent, "sp", "go")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(child, []llm.Message{llm.UserText("go")}) {
		t.Fatalf("child = %+v", child)
	}
}

func TestForkTranscriptErrors(t *testing.T) {
	t.Parallel()
	spawn := llm.ToolUse("sp", "task", json.RawMessage(`{}`))
	cases := []struct {
		name    string
		parent  []llm.Message
		id      string
		task    string
		wantErr string
	}{
		{"empty parent", nil, "sp", "t", "empty"},
		{"last is user", []llm.Message{llm.UserText("hi")}, "sp", "t", `is "user"`},
		{"id not found", forkParent(llm.Text("x"), spawn), "nope", "t", "no tool_use nope"},
		{"id is a text", forkParent(llm.Text("x")), "sp", "t", "no tool_use sp"},
		{"duplicate id", forkParent(spawn, spawn), "sp", "t", "twice"},
		{"empty id", forkParent(spawn), "", "t", "empty spawn call id"},
		{"empty task", forkParent(spawn), "sp", "", "empty task"},
		{"two assistants", []llm.Message{{Role: llm.Assistant, Content: []llm.Block{llm.Text("a")}}, {Role: llm.Assistant, Content: []llm.Block{spawn}}}, "sp", "t", "want user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ForkTranscript(c.parent, c.id, c.task)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want containing %q (got %+v)", err, c.wantErr, got)
			}
		})
	}
}

// genParent draws a valid transcript: alternating roles starting with the
// user, every assistant tool_use answered right after, the last message an
// assistant turn holding at least one tool_use (the spawn call).
func genParent(t *rapid.T) ([]llm.Message, string) {
	var ms []llm.Message
	id := 0
	nextID := func() string { id++; return fmt.Sprintf("tu%d", id) }
	turns := rapid.IntRange(0, 4).Draw(t, "turns")
	var pending []string
	for i := 0; i <= turns; i++ {
		var user []llm.Block
		for _, p := range pending {
			user = append(user, llm.ToolResult(p, "r", false))
		}
		if len(user) == 0 || rapid.Bool().Draw(t, "userText") {
			user = append(user, llm.Text("u"))
		}
		ms = append(ms, llm.Message{Role: llm.User, Content: user})

		var asst []llm.Block
		pending = nil
		n := rapid.IntRange(1, 5).Draw(t, "blocks")
		for j := 0; j < n; j++ {
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 0:
				asst = append(asst, llm.Text("a"))
			case 1:
				asst = append(asst, llm.Opaque("thinking", json.RawMessage(`{"type":"thinking"}`)))
			default:
				tid := nextID()
				pending = append(pending, tid)
				asst = append(asst, llm.ToolUse(tid, "read", json.RawMessage(`{}`)))
			}
		}
		if i == turns && len(pending) == 0 {
			tid := nextID()
			pending = append(pending, tid)
			at := rapid.IntRange(0, len(asst)).Draw(t, "spawnAt")
			asst = append(asst[:at], append([]llm.Block{llm.ToolUse(tid, "spawn_subagent", json.RawMessage(`{}`))}, asst[at:]...)...)
		}
		ms = append(ms, llm.Message{Role: llm.Assistant, Content: asst})
	}
	spawnID := rapid.SampledFrom(pending).Draw(t, "spawnID")
	return ms, spawnID
}

func TestForkTranscriptProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		parent, spawnID := genParent(t)
		before, _ := json.Marshal(parent)
		child, err := ForkTranscript(parent, spawnID, "task")
		if err != nil {
			t.Fatal(err)
		}
		if after, _ := json.Marshal(parent); !bytes.Equal(before, after) {
			t.Fatal("parent changed")
		}
		if len(child) == 0 || child[0].Role != llm.User || child[len(child)-1].Role != llm.User {
			t.Fatalf("child must start and end with a user message: %+v", child)
		}
		last := child[len(child)-1].Content
		if b := last[len(last)-1]; b.Type != llm.TypeText || b.Text != "task" {
			t.Fatalf("child does not end with the task: %+v", b)
		}
		for i, m := range child {
			if i > 0 && m.Role == child[i-1].Role {
				t.Fatalf("messages %d and %d are both %s", i-1, i, m.Role)
			}
			if len(m.Content) == 0 {
				t.Fatalf("message %d is empty", i)
			}
			for _, b := range m.Content {
				if b.Type == llm.TypeToolUse && b.ID == spawnID {
					t.Fatalf("spawn call %s still in message %d", spawnID, i)
				}
			}
			uses := m.ToolUses()
			if len(uses) == 0 {
				continue
			}
			next := child[i+1].Content // a tool_use turn is never last
			if len(next) < len(uses) {
				t.Fatalf("message %d: %d tool_use, %d blocks after", i, len(uses), len(next))
			}
			for k, u := range uses {
				if next[k].Type != llm.TypeToolResult || next[k].ToolUseID != u.ID {
					t.Fatalf("message %d: tool_use %s answered by %+v", i, u.ID, next[k])
				}
			}
		}
		// Everything before the spawning turn is reused byte for byte.
		cut := len(parent) - 2
		if p, c := mustJSON(t, parent[:cut]), mustJSON(t, child[:cut]); !bytes.Equal(p, c) {
			t.Fatalf("prefix differs")
		}
	})
}

func mustJSON(t *rapid.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
