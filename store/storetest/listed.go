package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// listing is a fan-out's children of parent as CreateInstances takes them:
// n instances, each with its task as its first message.
func listing(parent string, n int) []store.Listed {
	out := make([]store.Listed, n)
	for i := range out {
		id := fmt.Sprintf("%s-k%d", parent, i)
		out[i] = store.Listed{
			Instance: &instance.Record{ID: id, Parent: parent, Type: "worker", Task: "task of " + id, Mode: "isolated", Model: "fake:m"},
			Messages: []llm.Message{llm.UserText("task of " + id)},
		}
	}
	return out
}

func testCreateInstances(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("r", "")
	list := listing("r", 40)
	noErr(t, "create 40", e.s.CreateInstances(e.ctx, list))
	for i, l := range list {
		in := l.Instance
		if in.Root != "r" || in.Depth != 1 || in.State != instance.Created || !in.CreatedAt.Equal(Epoch) {
			t.Fatalf("listed %d filled in as %+v", i, in)
		}
		if got := e.get(in.ID); !reflect.DeepEqual(got, in) {
			t.Fatalf("listed %d: returned %+v, stored %+v", i, in, got)
		}
		if msgs, err := e.s.Transcript(e.ctx, in.ID); err != nil || !reflect.DeepEqual(msgs, l.Messages) {
			t.Fatalf("listed %d: transcript %v, %v", i, msgs, err)
		}
		if ts := e.transitions(in.ID); len(ts) != 1 || ts[0].To != instance.Created {
			t.Fatalf("listed %d: transitions %+v", i, ts)
		}
	}
	// Listed in order.
	want := []string{"r"}
	for _, l := range list {
		want = append(want, l.Instance.ID)
	}
	if got := listIDs(t, e, store.Filter{Root: "r"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("tree %v, want %v", got, want)
	}

	// The same list again (a replay after a crash), even with some moved
	// on, is a no-op that reports what is stored.
	e.move(list[3].Instance.ID, instance.Running)
	noErr(t, "append to k3", e.s.AppendMessages(e.ctx, list[3].Instance.ID, 1, 1, conversation()[1:2]))
	e.clock.Advance(time.Second)
	again := listing("r", 40)
	noErr(t, "create the same 40 again", e.s.CreateInstances(e.ctx, again))
	if in := again[3].Instance; in.State != instance.Running || !in.CreatedAt.Equal(Epoch) {
		t.Fatalf("repeated listing reports %+v", in)
	}
	if n := len(e.transitions(again[0].Instance.ID)); n != 1 {
		t.Fatalf("a repeated listing recorded a transition: %d", n)
	}

	// All or none: one child that conflicts (another task under its id,
	// or other first messages) and none of the new ones is created.
	more := listing("r", 45)
	more[10].Instance.Task = "another task"
	err := e.s.CreateInstances(e.ctx, more)
	wantErr(t, "a listing with a conflicting child", err, store.ErrConflict)
	more = listing("r", 45)
	more[2].Messages = []llm.Message{llm.UserText("other words")}
	err = e.s.CreateInstances(e.ctx, more)
	wantErr(t, "a listing with conflicting first messages", err, store.ErrConflict)
	if got := listIDs(t, e, store.Filter{Parent: "r"}); len(got) != 40 {
		t.Fatalf("a refused listing created children: %d under r", len(got))
	}
	// An unknown parent is refused, and nothing is created.
	orphans := append(listing("r", 1), listing("nobody", 1)...)
	orphans[0].Instance.ID = "r-new"
	wantErr(t, "a listing under an unknown parent", e.s.CreateInstances(e.ctx, orphans), store.ErrNotFound)
	if _, err := e.s.GetInstance(e.ctx, "r-new"); err == nil {
		t.Fatal("a refused listing created its first child")
	}
	noErr(t, "create the 45", e.s.CreateInstances(e.ctx, listing("r", 45)))
	if got := listIDs(t, e, store.Filter{Parent: "r"}); len(got) != 45 {
		t.Fatalf("%d under r, want 45", len(got))
	}
}
