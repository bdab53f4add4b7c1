//go:build unix

package durable_test

// The tree-total crash test: the fan-out of fanout_crash_test.go killed
// with SIGKILL at every boundary of every step its root and its children
// take (before, during and after each), then resumed by `deputy worker`:
// the tree's kept total (store.TreeSpent, one row the database keeps in
// the transaction of every usage write) must equal the sum over its
// instances' recorded usage and cost, and not be zero.

import (
	"context"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
)

func TestTreeTotalAfterCrashes(t *testing.T) {
	t.Parallel()
	bin := buildDeputy(t)
	s, err := fake.ParseScenario([]byte(fanOutCrashScenario), "fanout-crash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: s}))
	t.Cleanup(hs.Close)

	// The steps are those a clean run takes, read from the engine's own
	// records, so the test follows the workflow as it changes.
	clean := newCrashCase(t, bin, hs.URL, "sqlite")
	if clean.run(nil, 0) {
		t.Fatal("the clean run was killed")
	}
	checkTreeTotal(t, clean, true)
	steps := stepsOf(t, clean)
	if len(steps) < 10 || !slices.Contains(steps, "turn-1/call-1-fan_out") || !slices.Contains(steps, "child:end") {
		t.Fatalf("the clean run's steps: %v", steps)
	}
	for _, step := range steps {
		for _, when := range []string{"before:", "during:", "after:"} {
			fp := when + step
			t.Run(fp, func(t *testing.T) {
				t.Parallel()
				c := newCrashCase(t, bin, hs.URL, "sqlite")
				if !c.run(map[string]string{"DEPUTY_FAILPOINT": fp}, 0) {
					t.Fatal("deputy run never reached its failpoint")
				}
				w := c.cmd(nil, "worker", "-q", "--until-idle", "--workspace", c.ws)
				if out, err := w.CombinedOutput(); err != nil {
					t.Fatalf("deputy worker: %v\n%s", err, out)
				}
				checkTreeTotal(t, c, true)
			})
		}
	}
}

// openCase opens the store of a crash case whose processes have ended.
func openCase(t *testing.T, c *crashCase) *store.Store {
	t.Helper()
	var url string
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "DEPUTY_DB="); ok {
			url = v
		}
	}
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatalf("open the case's store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// stepsOf lists the steps the case's workflows took, failpoint names
// ("child:" before a child's), in the order first taken.
func stepsOf(t *testing.T, c *crashCase) []string {
	t.Helper()
	rows, err := openCase(t, c).DB().Query(`SELECT s.name, o.function_name FROM operation_outputs o
		JOIN workflow_status s ON s.workflow_uuid = o.workflow_uuid ORDER BY o.started_at_epoch_ms, o.function_id`)
	if err != nil {
		t.Fatalf("read the steps: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var wf, fn string
		if err := rows.Scan(&wf, &fn); err != nil {
			t.Fatal(err)
		}
		if wf == durable.ChildWorkflowName {
			fn = "child:" + fn
		}
		if !slices.Contains(out, fn) {
			out = append(out, fn)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTreeTotal checks every tree of the case: its kept total is the sum
// over its instances, and, when spent, not nothing.
func checkTreeTotal(t *testing.T, c *crashCase, spent bool) {
	t.Helper()
	st := openCase(t, c)
	ctx := context.Background()
	roots, err := st.ListInstances(ctx, store.Filter{OnlyRoots: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 1 {
		t.Fatalf("%d roots, want 1", len(roots))
	}
	for _, r := range roots {
		tree, err := st.ListInstances(ctx, store.Filter{Root: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		var sum store.TreeTotal
		for _, in := range tree {
			if !in.State.Terminal() {
				t.Errorf("instance %s is %s after the worker", in.ID, in.State)
			}
			sum.Tokens += in.Usage.Total()
			if in.Cost != nil {
				sum.USD += *in.Cost
			}
		}
		got, err := st.TreeSpent(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens != sum.Tokens || math.Abs(got.USD-sum.USD) > 1e-9 {
			t.Errorf("tree %s (%d instances): kept total %+v, the sum over its instances %+v", r.ID, len(tree), got, sum)
		}
		if spent && (got.Tokens == 0 || len(tree) != 4) {
			t.Errorf("tree %s: %d instances spent %d tokens; want 4 instances and their tokens", r.ID, len(tree), got.Tokens)
		}
	}
}
