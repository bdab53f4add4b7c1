// Command hundred is a parent agent that delegates to a hundred children,
// written against deputy's exported API only, as a program outside the
// repository would be.
//
// The parent is offered one tool, spawn_subagent: it holds the program's
// lookup tool for its children but cannot call it itself. It hands each of
// a hundred shards to an isolated child of the shard-reader type, whose
// requests offer exactly its one tool, lookup; the children run eight at a
// time and each reports one line back. Every request goes through the
// program's own HTTP client (its pool sized for the children calling at
// once), to an endpoint with a key given in code: nothing is read from the
// environment. The model is deputy's fake Anthropic API, started here over
// real HTTP and scripted in Go, so the example runs offline; the runs are
// recorded in a SQLite database, as a real program's would be.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// Shards is how many children the parent starts.
const Shards = 100

const (
	// apiKey is the fake API's key: it refuses any request without it.
	apiKey = "sk-example-hundred"
	// parentSystem and readerSystem tell the scripted model who asks.
	parentSystem = "You coordinate shard readers: hand every shard to one, then add up their totals."
	readerSystem = "You read one shard with the lookup tool and report its total."
)

func main() {
	dir, err := os.MkdirTemp("", "deputy-hundred") // the database's; a real program keeps it
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	res, err := run(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%d children, %d model requests, all through the program's client)\n",
		res.Report, res.Children, res.ClientRequests)
}

// result is what a run of the example did, for main to print and the test
// to check.
type result struct {
	Report   string
	Children int
	// Requests is the fake API's log of what it received;
	// ClientRequests how many requests the program's client sent.
	Requests       []fake.LoggedRequest
	ClientRequests int64
}

// run starts the fake API, opens a runtime on a SQLite file in dir and runs
// the parent to its end.
func run(ctx context.Context, dir string) (*result, error) {
	api := fake.NewServer(fake.Options{APIKey: apiKey, Responder: script{}})
	url, stop, err := api.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer stop()

	// The program's client: a pool that keeps a connection for each of
	// the children calling at once (net/http's default keeps two per
	// host), and a count of what it sent.
	sent := &counter{next: &http.Transport{MaxIdleConnsPerHost: 16}}
	client := &http.Client{Transport: sent}

	reader := &deputy.Definition{
		Name:         "shard-reader",
		Description:  "Reads one shard with the lookup tool and reports its total.",
		SystemPrompt: readerSystem,
		Tools:        []string{"lookup"}, // exactly what its requests offer
	}
	rt, err := deputy.Open(ctx, deputy.Options{
		ModelSpec:   "anthropic:claude-sonnet-4-5",
		Provider:    deputy.ProviderOptions{HTTPClient: client, BaseURL: url, APIKey: apiKey},
		DB:          filepath.Join(dir, "deputy.db"),
		Workspace:   dir,
		Tools:       []deputy.Tool{lookup{}},
		Offer:       []string{"spawn_subagent"},
		Definitions: []*deputy.Definition{reader},
		System:      parentSystem,
	})
	if err != nil {
		return nil, err
	}
	defer rt.Close()

	in, err := rt.Run(ctx, deputy.Task{Text: fmt.Sprintf("Add up the totals of shards 1 to %d.", Shards)})
	if err != nil {
		return nil, err
	}
	if in.State != deputy.Completed {
		return nil, fmt.Errorf("the parent %s: %s", in.State, in.Error)
	}
	kids, err := rt.Children(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		if k.State != deputy.Completed {
			return nil, fmt.Errorf("child %s %s: %s", k.ID, k.State, k.Error)
		}
	}
	return &result{Report: in.Report, Children: len(kids), Requests: api.Requests(), ClientRequests: sent.n.Load()}, nil
}

// counter is an http.RoundTripper that counts the requests it sends.
type counter struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// lookup is the program's tool: a shard's total (its number squared,
// standing in for a real data source).
type lookup struct{}

func (lookup) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "lookup", Description: "Returns the total of one shard.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"shard":{"type":"integer","minimum":1}},"required":["shard"]}`)}
}

func (lookup) ReadOnly() bool { return true }

func (lookup) Run(_ context.Context, in json.RawMessage) (string, error) {
	var v struct{ Shard int }
	if err := json.Unmarshal(in, &v); err != nil {
		return "", err
	}
	return strconv.Itoa(v.Shard * v.Shard), nil
}

// script is the fake model's part, for the parent and for each reader.
type script struct{}

var (
	shardRE = regexp.MustCompile(`shard (\d+)`)
	totalRE = regexp.MustCompile(`total: (\d+)`)
)

func (script) Respond(req *llm.Request, _ fake.RequestInfo) fake.Reply {
	var results []string
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == llm.TypeToolResult {
				results = append(results, b.Text)
			}
		}
	}
	switch reader := strings.Contains(req.System, readerSystem); {
	case reader && len(results) == 0:
		shard := shardRE.FindStringSubmatch(req.Messages[0].Text())
		if shard == nil {
			return text("no shard named in the task")
		}
		return fake.Reply{Content: []llm.Block{llm.ToolUse("", "lookup", json.RawMessage(`{"shard":`+shard[1]+`}`))}}
	case reader:
		shard := shardRE.FindStringSubmatch(req.Messages[0].Text())
		return text(fmt.Sprintf("shard %s total: %s", shard[1], results[0]))
	case len(results) == 0:
		calls := make([]llm.Block, Shards)
		for i := range calls {
			input, _ := json.Marshal(map[string]string{"subagent_type": "shard-reader",
				"description": fmt.Sprintf("shard %d", i+1), "task": fmt.Sprintf("Read shard %d.", i+1)})
			calls[i] = llm.ToolUse("", "spawn_subagent", input)
		}
		return fake.Reply{Content: calls}
	}
	sum := 0
	for _, r := range results {
		if m := totalRE.FindStringSubmatch(r); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
	}
	return text(fmt.Sprintf("The %d shards total %d.", len(results), sum))
}

func text(s string) fake.Reply { return fake.Reply{Content: []llm.Block{llm.Text(s)}} }
