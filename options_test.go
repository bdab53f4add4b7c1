package deputy_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// recorder is a program's own model: it answers "done" and keeps the
// names of the tools each request offered.
type recorder struct {
	mu     sync.Mutex
	offers [][]string
}

func (r *recorder) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	r.mu.Lock()
	r.offers = append(r.offers, names)
	r.mu.Unlock()
	return &llm.Response{Content: []llm.Block{llm.Text("done")}, StopReason: llm.StopEndTurn}, nil
}

// A root holds exactly the tools it is given: no built-in comes with them
// unless the program adds BuiltinTools. Its model is a program's own,
// recorded under ProgramModel.
func TestRootsHoldExactlyTheirTools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		o        deputy.Options
		has, not []string
	}{
		{"tools only", deputy.Options{Tools: []deputy.Tool{wordCount{}}}, []string{"wordcount", "spawn_subagent"},
			[]string{"bash", "read_file", "web_fetch"}},
		{"with the built-ins", deputy.Options{Tools: []deputy.Tool{wordCount{}}, RunTools: deputy.BuiltinTools},
			[]string{"wordcount", "bash", "read_file"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := &recorder{}
			o := c.o
			o.Model, o.Workspace, o.DB = m, dir, filepath.Join(dir, "d.db")
			rt, err := deputy.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			in, err := rt.Run(ctx, deputy.Task{Text: "go"})
			if err != nil || in.State != deputy.Completed || in.Model != deputy.ProgramModel {
				t.Fatalf("%v %+v", err, in)
			}
			offered := m.offers[0]
			for _, n := range c.has {
				if !slices.Contains(offered, n) {
					t.Errorf("%s not offered: %v", n, offered)
				}
			}
			for _, n := range c.not {
				if slices.Contains(offered, n) {
					t.Errorf("%s offered: %v", n, offered)
				}
			}
		})
	}
}

// countingTransport counts the requests of the client it is given to.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// Every model the runtime opens, the root's and a child's tier on another
// provider, is reached over the program's HTTP client with the endpoints
// and keys given in code; with Stream off, every call is the plain one.
func TestEveryModelUsesTheProgramsClient(t *testing.T) {
	t.Parallel()
	const key = "sk-program-42"
	script, err := fake.ParseScenario([]byte(spawnScenario), "spawn")
	if err != nil {
		t.Fatal(err)
	}
	srv := fake.NewServer(fake.Options{APIKey: key, Responder: script})
	root, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ct := &countingTransport{}
	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{
		ModelSpec: "anthropic:fake",
		Provider: deputy.ProviderOptions{HTTPClient: &http.Client{Transport: ct}, BaseURL: root, APIKey: key,
			Endpoints: map[string]deputy.Endpoint{"openai": {BaseURL: root + "/v1", APIKey: key}}},
		Config:    &deputy.Config{Tiers: map[string]string{agentdef.TierHaiku: "openai:fake"}},
		Workspace: dir, DB: filepath.Join(dir, "d.db"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "go"})
	if err != nil || in.State != deputy.Completed || in.Report != "done" {
		t.Fatalf("%v %+v", err, in)
	}
	reqs := srv.Requests()
	paths := map[string]int{}
	for _, r := range reqs {
		paths[r.Path]++
		if r.Stream {
			t.Errorf("%s streamed with Options.Stream off", r.Path)
		}
	}
	if paths["/v1/messages"] != 2 || paths["/v1/chat/completions"] != 1 || ct.n.Load() != int64(len(reqs)) {
		t.Errorf("requests %v, %d through the program's client", paths, ct.n.Load())
	}
}

// Open reads nothing it is not given: not $DEPUTY_DB, not a provider key
// in the environment, not the workspace's or the user's definitions, not
// deputy.yaml, not the OTLP variables.
func TestOpenReadsNoEnvironment(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "env.db")
	t.Setenv("DEPUTY_DB", elsewhere)
	t.Setenv("HOME", home)
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for path, body := range map[string]string{
		filepath.Join(dir, ".claude", "agents", "planted.md"): "---\nname: planted\ndescription: d\n---\nx\n",
		filepath.Join(home, ".deputy", "agents", "mine.md"):   "---\nname: mine\ndescription: d\n---\nx\n",
		filepath.Join(dir, "deputy.yaml"):                     "tiers: {haiku: \"anthropic:claude-haiku-4-5\"}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	_, err := deputy.Open(ctx, deputy.Options{ModelSpec: "anthropic:claude-sonnet-4-5", Workspace: dir})
	if err == nil || !strings.Contains(err.Error(), "Options.APIKey is empty") || strings.Contains(err.Error(), "sk-from") {
		t.Errorf("a key from the environment: %v", err)
	}
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, name := range []string{"planted", "mine"} {
		if _, ok := rt.Definition(name); ok {
			t.Errorf("definition %s was read unasked", name)
		}
	}
	if _, err := os.Stat(elsewhere); err == nil {
		t.Error("the database went to $DEPUTY_DB")
	}
	if _, err := os.Stat(filepath.Join(dir, ".deputy", "deputy.db")); err != nil {
		t.Errorf("the default database: %v", err)
	}
	// The sources and the configuration, given, are read.
	rt2, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, DB: filepath.Join(dir, "2.db"),
		Sources: deputy.Sources{Project: dir, User: filepath.Join(home, ".deputy")}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	for _, name := range []string{"planted", "mine"} {
		if _, ok := rt2.Definition(name); !ok {
			t.Errorf("definition %s of Sources was not read", name)
		}
	}
}

// A runtime without a model of its own carries what others started; its
// Start refuses a task that names no model, recording nothing.
func TestARuntimeWithoutAModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{Workspace: dir, DB: filepath.Join(dir, "d.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Start(ctx, deputy.Task{Text: "go"}); !errors.Is(err, deputy.ErrRefused) || !strings.Contains(err.Error(), "no model") {
		t.Errorf("a task with no model: %v", err)
	}
	if all, err := rt.List(ctx, deputy.Filter{}); err != nil || len(all) != 0 {
		t.Errorf("recorded %d, %v", len(all), err)
	}
	in, err := rt.Run(ctx, deputy.Task{Text: "go", Model: "fake"})
	if err != nil || in.State != deputy.Completed {
		t.Errorf("a task naming its model: %v %+v", err, in)
	}
}

// An empty deputy.yaml in the workspace (the placeholder a fenced child's
// sandbox mounts while it runs) does not hide the user's; a workspace
// deputy.yaml with content still wins, and an empty file loaded by name is
// read as given.
func TestFindConfigSkipsEmptyFiles(t *testing.T) {
	t.Parallel()
	user, ws := t.TempDir(), t.TempDir()
	write := func(p, body string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := deputy.FindConfig(ws, user); c != nil || err != nil {
		t.Fatalf("none: %+v %v", c, err)
	}
	write(filepath.Join(user, "deputy.yaml"), "tiers: {haiku: \"anthropic:claude-haiku-4-5\"}\n")
	write(filepath.Join(ws, "deputy.yaml"), "")
	c, err := deputy.FindConfig(ws, "", user)
	if err != nil || c.Tiers[agentdef.TierHaiku] != "anthropic:claude-haiku-4-5" {
		t.Fatalf("an empty workspace deputy.yaml shadowed the user's: %+v %v", c, err)
	}
	if c, err := deputy.LoadConfig(filepath.Join(ws, "deputy.yaml")); err != nil || len(c.Tiers) != 0 {
		t.Fatalf("explicit empty file: %+v %v", c, err)
	}
	write(filepath.Join(ws, "deputy.yaml"), "tiers: {haiku: \"openai:gpt-5-mini\"}\n")
	if c, err := deputy.FindConfig(ws, user); err != nil || c.Tiers[agentdef.TierHaiku] != "openai:gpt-5-mini" {
		t.Fatalf("the workspace's own: %+v %v", c, err)
	}
	write(filepath.Join(ws, "deputy.yaml"), "tiers: [no]\n")
	if _, err := deputy.FindConfig(ws, user); err == nil || !strings.Contains(err.Error(), "deputy.yaml:1") {
		t.Fatalf("a bad file: %v", err)
	}
}

// A workspace where a fenced child's tripwire fired (fence.UntrustedFile)
// is not opened: Open fails naming the files and what to do, until the
// user has removed the marker.
func TestOpenRefusesUntrustedWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	planted := filepath.Join(ws, ".claude", "agents", "general-purpose.md")
	open := func() error {
		rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Workspace: ws,
			Sources: deputy.Sources{Project: ws}})
		if err == nil {
			return rt.Close()
		}
		return err
	}
	if err := open(); err != nil {
		t.Fatalf("before the tripwire: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".deputy"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(ws, fence.UntrustedFile)
	if err := os.WriteFile(marker, []byte("# header\n2026-01-02T03:04:05Z\ti-1\t"+planted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := open()
	var ue *fence.UntrustedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), planted) || !strings.Contains(err.Error(), "remove "+marker) {
		t.Fatalf("after the tripwire: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatalf("after the review: %v", err)
	}
}

// Enqueue records a root and queues it without an engine, so it works
// while another runtime holds the database; that runtime's queue runs it.
// A task with no model to run on is refused before anything is recorded.
func TestEnqueueLeavesTheRunToARuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	o := deputy.Options{ModelSpec: "fake", Scenario: []byte("rules:\n  - text: \"queued and done\"\n"),
		Workspace: dir, DB: filepath.Join(dir, "d.db")}
	rt, err := deputy.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id, err := deputy.Enqueue(ctx, o, deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := rt.Wait(ctx, id); err != nil || in.State != deputy.Completed || in.Report != "queued and done" {
		t.Fatalf("%v %+v", err, in)
	}
	noModel := o
	noModel.ModelSpec = ""
	if _, err := deputy.Enqueue(ctx, noModel, deputy.Task{Text: "go"}); !errors.Is(err, deputy.ErrRefused) {
		t.Errorf("no model: %v", err)
	}
	if all, _ := rt.List(ctx, deputy.Filter{}); len(all) != 1 {
		t.Errorf("%d instances recorded, want the queued one", len(all))
	}
}
