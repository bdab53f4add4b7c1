package deputy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a runtime on a fresh SQLite file and workspace.
func open(t *testing.T, scenario string, o deputy.Options) *deputy.Runtime {
	t.Helper()
	dir := t.TempDir()
	o.ModelSpec, o.Scenario = "fake", []byte(scenario)
	o.DB, o.Workspace = filepath.Join(dir, "deputy.db"), dir
	rt, err := deputy.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}

const askScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which branch?"}}]
  - match: {turn: 2}
    text: "merged into {{index .ToolResults 0}}"
`

// A root that asks settles as Asking with its question; the answer starts
// its next run, which Wait follows to the end.
func TestAskAnswerWait(t *testing.T) {
	t.Parallel()
	rt := open(t, askScenario, deputy.Options{})
	ctx := context.Background()
	in, err := rt.Run(ctx, deputy.Task{Text: "merge it"})
	if err != nil {
		t.Fatal(err)
	}
	if in.State != deputy.Asking {
		t.Fatalf("state %s, want asking", in.State)
	}
	if q, err := rt.Question(ctx, in.ID); err != nil || q != "Which branch?" {
		t.Fatalf("question %q, %v", q, err)
	}
	if err := rt.Answer(ctx, in.ID, "main"); err != nil {
		t.Fatal(err)
	}
	in, err = rt.Wait(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != deputy.Completed || in.Report != "merged into main" {
		t.Fatalf("%s %q", in.State, in.Report)
	}
	if err := rt.Answer(ctx, in.ID, "again"); !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("a second answer: %v", err)
	}
}

const spawnScenario = `
rules:
  - match: {system: "read-only explorer"}
    text: "found it"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "look"}}]
  - match: {turn: 2}
    text: "done"
`

// Subscribers hear every instance's events, children's included, until
// they unsubscribe; only a root's person answers or steers it.
func TestSubscribeAndChildren(t *testing.T) {
	t.Parallel()
	rt := open(t, spawnScenario, deputy.Options{})
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[agent.EventKind]int{}
	stop := rt.Subscribe(func(e deputy.Event) {
		mu.Lock()
		seen[e.Kind]++
		mu.Unlock()
	})
	in, err := rt.Run(ctx, deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	mu.Lock()
	spawned, ended := seen[agent.EventSpawned], seen[agent.EventEnded]
	mu.Unlock()
	if in.State != deputy.Completed || spawned != 2 || ended < 1 { // the root and its child
		t.Fatalf("%s; events %v", in.State, seen)
	}
	kids, err := rt.Children(ctx, in.ID)
	if err != nil || len(kids) != 1 || kids[0].Report != "found it" {
		t.Fatalf("children %+v %v", kids, err)
	}
	if err := rt.Send(ctx, kids[0].ID, "hi"); err == nil || !strings.Contains(err.Error(), "only its parent") {
		t.Errorf("send to a child: %v", err)
	}
	if _, err := rt.Run(ctx, deputy.Task{Text: "again"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[agent.EventSpawned] != 2 {
		t.Errorf("an unsubscribed function still hears events: %v", seen)
	}
}

const fanScenario = `
rules:
  - match: {system: "merge the reports"}
    text: "a and b agree"
  - match: {system: "read-only explorer", last_user: "task a"}
    text: "yes"
  - match: {system: "read-only explorer", last_user: "task b"}
    text: "Yes "
  - match: {system: "read-only explorer", last_user: "task c"}
    text: "no"
`

// A program's fan-out: each merge, its results as data, usage summed,
// the merge's call included.
func TestFanOutMerges(t *testing.T) {
	t.Parallel()
	rt := open(t, fanScenario, deputy.Options{})
	ctx := context.Background()
	tasks := []deputy.FanTask{
		{ID: "a", Type: "explorer", Task: "task a"},
		{ID: "b", Type: "explorer", Task: "task b"},
		{ID: "c", Type: "explorer", Task: "task c"},
	}
	res, err := rt.FanOut(ctx, deputy.FanOut{Tasks: tasks, Merge: deputy.MergeVote})
	if err != nil {
		t.Fatal(err)
	}
	if res.Vote == nil || res.Vote.Answer != "yes" || res.Vote.Votes != 2 || len(res.Results) != 3 {
		t.Fatalf("vote %+v results %+v", res.Vote, res.Results)
	}
	var sum llm.Usage
	for _, r := range res.Results {
		if r.State != instance.Completed || r.Instance == "" || r.Usage.Total() == 0 {
			t.Errorf("result %+v", r)
		}
		sum.Add(r.Usage)
	}
	if res.Usage != sum {
		t.Errorf("fan-out usage %+v, want its tasks' %+v (the planner calls no model)", res.Usage, sum)
	}

	res, err = rt.FanOut(ctx, deputy.FanOut{Tasks: tasks[:2], Merge: deputy.MergeSummarize, Limit: 300})
	if err != nil {
		t.Fatal(err)
	}
	if res.Merged != "a and b agree" || res.Merger == nil || res.Merger.Usage.Total() == 0 {
		t.Fatalf("summary %q by %+v", res.Merged, res.Merger)
	}
	sum = res.Merger.Usage
	for _, r := range res.Results {
		sum.Add(r.Usage)
	}
	if res.Usage != sum {
		t.Errorf("fan-out usage %+v, want the tasks' and the summary's %+v", res.Usage, sum)
	}
}

// A bad plan is refused before anything starts.
func TestFanOutRejectsBadPlans(t *testing.T) {
	t.Parallel()
	rt := open(t, fanScenario, deputy.Options{})
	ctx := context.Background()
	_, err := rt.FanOut(ctx, deputy.FanOut{Tasks: []deputy.FanTask{
		{ID: "a", Type: "explorer", Task: "x", DependsOn: []string{"b"}},
		{ID: "b", Type: "explorer", Task: "y", DependsOn: []string{"a"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "cycle: a -> b -> a") {
		t.Fatalf("cycle: %v", err)
	}
	_, err = rt.FanOut(ctx, deputy.FanOut{Tasks: []deputy.FanTask{{ID: "a", Type: "explorer", Task: "x", DependsOn: []string{"zz"}}}})
	if err == nil || !strings.Contains(err.Error(), `depends on "zz"`) {
		t.Fatalf("missing dependency: %v", err)
	}
	res, err := rt.FanOut(ctx, deputy.FanOut{Tasks: []deputy.FanTask{{ID: "a", Type: "explorer", Task: "task a"}},
		MergeFunc: func([]deputy.FanResult) (string, error) { return "", errors.New("no merge today") }})
	if err == nil || !strings.Contains(err.Error(), "no merge today") || !strings.Contains(res.Merged, "## a\nyes") {
		t.Fatalf("a failing merge function: %v (merged %q)", err, res.Merged)
	}
	one := []deputy.FanTask{{ID: "a", Type: "explorer", Task: "x"}}
	for _, c := range []struct {
		f    deputy.FanOut
		want string
	}{
		{deputy.FanOut{Tasks: one, Merge: "average"}, `merge "average" is not`},
		{deputy.FanOut{Tasks: one, Judge: "reviewer"}, "Judge goes with MergeVote"},
		{deputy.FanOut{Tasks: one, Merge: deputy.MergeVote, Judge: "nosuch"}, `judge "nosuch" is not a subagent type`},
		{deputy.FanOut{Tasks: one, Merge: deputy.MergeSummarize, Limit: 10}, "at least 200"},
	} {
		if _, err := rt.StartFanOut(ctx, c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.f, err)
		}
	}
}

// A program's tools and definitions reach its agents; a bad definition
// or a second runtime on the same database is a clear error at Open.
func TestOpenRegistersAndRefuses(t *testing.T) {
	t.Parallel()
	const scenario = `
rules:
  - match: {system: "You count words", turn: 1}
    tool_calls: [{name: wordcount, input: {text: "one two three"}}]
    text: "counting"
  - match: {system: "You count words"}
    text: "{{index .ToolResults 0}} words"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: counter, task: "count"}}]
  - match: {turn: 2}
    text: '{{find "[0-9]+ words" (index .ToolResults 0)}}'
`
	counter := &deputy.Definition{Name: "counter", Description: "Counts words.", SystemPrompt: "You count words.",
		Tools: []string{"wordcount"}}
	dir := t.TempDir()
	o := deputy.Options{ModelSpec: "fake", Scenario: []byte(scenario), DB: filepath.Join(dir, "d.db"), Workspace: dir,
		Tools: []deputy.Tool{wordCount{}}, Definitions: []*deputy.Definition{counter}}
	ctx := context.Background()
	rt, err := deputy.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "how many?"})
	if err != nil || in.Report != "3 words" {
		t.Fatalf("%v %+v", err, in)
	}
	if p := rt.Problems(); len(p) != 0 {
		t.Errorf("problems: %v", p)
	}
	if _, err := deputy.Open(ctx, o); err == nil || !strings.Contains(err.Error(), "another deputy process") {
		t.Errorf("a second runtime on one database: %v", err)
	}
	bad := o
	bad.DB = filepath.Join(dir, "other.db")
	bad.Definitions = []*deputy.Definition{{Name: "x", Description: "d", Mode: "sideways"}}
	if _, err := deputy.Open(ctx, bad); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("a bad definition: %v", err)
	}
	bad = o
	bad.Workspace = filepath.Join(dir, "nope")
	if _, err := deputy.Open(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a missing workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.db")); err == nil {
		t.Errorf("a refused Open left a database behind")
	}
}

type wordCount struct{}

func (wordCount) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "wordcount", Description: "Counts the words of a text.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
}
func (wordCount) ReadOnly() bool { return true }
func (wordCount) Run(_ context.Context, in json.RawMessage) (string, error) {
	var v struct{ Text string }
	if err := json.Unmarshal(in, &v); err != nil {
		return "", err
	}
	return strconv.Itoa(len(strings.Fields(v.Text))), nil
}

// A definition file of Sources that does not parse is skipped, not fatal,
// and Problems names it with its line.
func TestOpenReportsSkippedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".deputy", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".deputy", "agents", "bad.md"), []byte("---\nname: bad\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Workspace: dir, DB: filepath.Join(dir, "d.db"),
		Sources: deputy.Sources{Project: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	p := rt.Problems()
	if len(p) != 1 || !errors.Is(p[0], deputy.ErrSkipped) || !strings.Contains(p[0].Error(), "bad.md") || !strings.Contains(p[0].Error(), "description") {
		t.Fatalf("problems %v", p)
	}
}

// waitForever is a tool that returns only when its call is cancelled: a
// run that a cancel did not reach would hold it for good.
type waitForever struct{}

func (waitForever) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "wait_forever", Description: "Waits.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (waitForever) ReadOnly() bool { return true }
func (waitForever) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// A cancel that comes as a root's run starts (the instance read as created
// while its workflow moves it to running) still stops the run: the record
// never says cancelled while a run goes on.
func TestCancelAsARunStarts(t *testing.T) {
	t.Parallel()
	rt := open(t, `
rules:
  - match: {turn: 1}
    tool_calls: [{name: wait_forever, input: {}}]
  - match: {turn: 2}
    text: "done"
`, deputy.Options{Tools: []deputy.Tool{waitForever{}}})
	ctx := context.Background()
	for i := range 30 {
		id, err := rt.Start(ctx, deputy.Task{Text: "wait"})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Cancel(ctx, id); err != nil {
			t.Fatalf("try %d: cancel: %v", i, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		in, err := rt.Wait(wctx, id)
		cancel()
		if err != nil {
			now, _ := rt.Get(ctx, id)
			msgs, _ := rt.Transcript(ctx, id)
			t.Fatalf("try %d: the run went on after its cancel: %v (now %s, %d messages)", i, err, now.State, len(msgs))
		}
		if in.State != deputy.Cancelled {
			t.Fatalf("try %d: %s after a cancel", i, in.State)
		}
	}
}
