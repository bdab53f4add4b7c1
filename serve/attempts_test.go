package serve_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy"
)

type attemptJSON struct {
	Turn, N, Status int
	Error, Reason   string
	Retry           bool
	WaitMS          int64 `json:"wait_ms"`
	LatencyMS       int64 `json:"latency_ms"`
	At              time.Time
}

// Each model call's attempts over the API: the root's first call was
// overloaded once and retried after the backoff; the failed child's two
// attempts are both 500s, the last not retried. An unknown id is a 404.
// The tree lists children in spawn order.
func TestAttempts(t *testing.T) {
	t.Parallel()
	rt := wireRuntime(t, failingScenario)
	e := serveEnv(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := rt.Run(ctx, deputy.Task{Text: "Survey the release"})
	if err != nil || root.State != deputy.Completed {
		t.Fatalf("the survey: %+v %v", root, err)
	}
	var got struct{ Attempts []attemptJSON }
	e.want(200, "GET", "/api/instances/"+root.ID+"/attempts", "", &got)
	a := got.Attempts
	if len(a) != 3 {
		t.Fatalf("root attempts %+v, want 3 (turn 1 twice, turn 2 once)", a)
	}
	if a[0].Turn != 1 || a[0].N != 1 || a[0].Status != 529 || a[0].Error == "" || !a[0].Retry ||
		a[0].WaitMS != retryWait.Milliseconds() || a[0].At.IsZero() {
		t.Errorf("the overloaded attempt: %+v", a[0])
	}
	if a[1].Turn != 1 || a[1].N != 2 || a[1].Status != 200 || a[1].Error != "" || a[1].Retry {
		t.Errorf("its retry: %+v", a[1])
	}
	if a[2].Turn != 2 || a[2].N != 1 || a[2].Status != 200 {
		t.Errorf("turn 2: %+v", a[2])
	}
	checkAttemptPages(t, e, root.ID)

	kids, err := rt.Children(ctx, root.ID)
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %v %v", kids, err)
	}
	var beta *deputy.Instance
	for _, k := range kids {
		if strings.Contains(k.Task, "Break") {
			beta = k
		}
	}
	if beta == nil || beta.State != deputy.Failed {
		t.Fatalf("the failing child: %+v", beta)
	}
	e.want(200, "GET", "/api/instances/"+beta.ID+"/attempts", "", &got)
	if b := got.Attempts; len(b) != 2 || b[0].Status != 500 || b[1].Status != 500 || b[0].Error == "" ||
		!b[0].Retry || b[1].Retry || b[1].N != 2 {
		t.Errorf("the failed child's attempts: %+v", b)
	}
	e.wantError(404, "not_found", "GET", "/api/instances/nope/attempts", "")

	// Spawn order: the order the children were created in, as the store
	// lists them (storetest's CreationOrder holds the store to it); not
	// created time then id, which put same-instant siblings in random order.
	var tree struct {
		Root struct {
			Children []struct{ ID, State, Error string }
		}
	}
	e.want(200, "GET", "/api/instances/"+root.ID+"/tree", "", &tree)
	if c := tree.Root.Children; len(c) != 2 || c[0].ID != kids[0].ID || c[1].ID != kids[1].ID {
		t.Errorf("tree children %+v, want %s then %s", c, kids[0].ID, kids[1].ID)
	}
}

// checkAttemptPages reads root's three attempts (turn 1's two, turn 2's
// one) a turn and a page at a time; bad queries are 400s.
func checkAttemptPages(t *testing.T, e *env, id string) {
	t.Helper()
	for _, c := range []struct {
		query string
		want  []string // turn.n of each attempt answered
		total int
	}{
		{"limit=1", []string{"1.1"}, 3},
		{"offset=1&limit=1", []string{"1.2"}, 3},
		{"offset=1", []string{"1.2", "2.1"}, 3},
		{"turn=1", []string{"1.1", "1.2"}, 2},
		{"turn=1&offset=1", []string{"1.2"}, 2},
		{"turn=2", []string{"2.1"}, 1},
		{"turn=9", []string{}, 0},
		{"offset=5", []string{}, 3},
		{"limit=0", []string{}, 3},
	} {
		var got struct {
			Attempts      []attemptJSON
			Offset, Total int
		}
		e.want(200, "GET", "/api/instances/"+id+"/attempts?"+c.query, "", &got)
		ns := []string{}
		for _, a := range got.Attempts {
			ns = append(ns, fmt.Sprintf("%d.%d", a.Turn, a.N))
		}
		if !slices.Equal(ns, c.want) || got.Total != c.total || got.Attempts == nil {
			t.Errorf("?%s: attempts %v of %d, want %v of %d", c.query, ns, got.Total, c.want, c.total)
		}
	}
	for _, q := range []string{"turn=0", "turn=x", "turn=-1", "limit=-1", "offset=y"} {
		e.wantError(400, "bad_request", "GET", "/api/instances/"+id+"/attempts?"+q, "")
	}
}
