package storetest

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// sumOver is what the tree of root recorded spending, summed over its
// instances as they are stored: what TreeSpent must equal.
func sumOver(t *testing.T, e *env, root string) store.TreeTotal {
	t.Helper()
	list, err := e.s.ListInstances(e.ctx, store.Filter{Root: root})
	noErr(t, "list the tree of "+root, err)
	var sum store.TreeTotal
	for _, in := range list {
		sum.Tokens += in.Usage.Total()
		if in.Cost != nil {
			sum.USD += *in.Cost
		}
	}
	return sum
}

// sameTotal fails unless the kept total of root equals the sum over its
// instances, and want when given.
func sameTotal(t *testing.T, e *env, root string, want *store.TreeTotal) {
	t.Helper()
	got, err := e.s.TreeSpent(e.ctx, root)
	noErr(t, "tree total of "+root, err)
	sum := sumOver(t, e, root)
	if got.Tokens != sum.Tokens || math.Abs(got.USD-sum.USD) > 1e-9 {
		t.Fatalf("tree total of %s = %+v, the sum over its instances %+v", root, got, sum)
	}
	if want != nil && (got.Tokens != want.Tokens || math.Abs(got.USD-want.USD) > 1e-9) {
		t.Fatalf("tree total of %s = %+v, want %+v", root, got, *want)
	}
}

func testTreeTotals(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("r", "")
	sameTotal(t, e, "r", &store.TreeTotal{})
	e.create("a", "r")
	e.create("b", "r")
	e.create("c", "a")
	e.create("other", "")
	for _, id := range []string{"r", "a", "b", "c", "other"} {
		e.move(id, instance.Running)
	}
	u := func(in, out int64) llm.Usage {
		return llm.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: 2 * in}
	}

	// Every writer of an instance's totals: progress, an append's
	// progress, a finish; each with and without a price.
	noErr(t, "progress of a", e.s.UpdateProgress(e.ctx, "a", 1, 0, u(10, 5), ptr(0.25)))
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 35, USD: 0.25})
	noErr(t, "progress of a again", e.s.UpdateProgress(e.ctx, "a", 2, 0, u(20, 5), ptr(0.5)))
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 65, USD: 0.5})
	noErr(t, "append to b", e.s.AppendWith(e.ctx, "b", 1, 0, conversation()[:1],
		store.With{Progress: &store.Progress{Turns: 1, Usage: u(1, 1)}}))
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 69, USD: 0.5})
	noErr(t, "finish c", e.s.Finish(e.ctx, "c", store.Result{State: instance.Completed, StopReason: "completed",
		Usage: u(100, 50), Cost: ptr(1.5)}))
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 419, USD: 2})
	// A repeated finish (a replay) counts nothing twice; a price taken
	// away takes its cost off.
	noErr(t, "finish c again", e.s.Finish(e.ctx, "c", store.Result{State: instance.Completed, StopReason: "completed",
		Usage: u(100, 50), Cost: ptr(1.5)}))
	noErr(t, "progress of a unpriced", e.s.UpdateProgress(e.ctx, "a", 2, 0, u(20, 5), nil))
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 419, USD: 1.5})
	// A write refused (an ended instance's progress) changes nothing.
	if err := e.s.UpdateProgress(e.ctx, "c", 9, 9, u(1000, 1000), ptr(9.0)); err == nil {
		t.Fatal("progress of an ended instance: no error")
	}
	sameTotal(t, e, "r", &store.TreeTotal{Tokens: 419, USD: 1.5})
	sameTotal(t, e, "other", &store.TreeTotal{})

	// Many writers at once, in one tree: the total is kept exactly.
	var wg sync.WaitGroup
	kids := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	for _, k := range kids {
		e.create(k, "r")
		e.move(k, instance.Running)
	}
	for i, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := range 8 {
				cost := ptr(rng.Float64())
				if n%3 == 0 {
					cost = nil
				}
				if err := e.s.UpdateProgress(e.ctx, k, n, 0, u(rng.Int64N(100), rng.Int64N(100)), cost); err != nil {
					t.Errorf("progress of %s: %v", k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	sameTotal(t, e, "r", nil)

	// Deleting a subtree takes its spending off; deleting the tree, its row.
	for _, id := range append([]string{"r", "a", "b", "other"}, kids...) {
		in := e.get(id)
		noErr(t, "finish "+id, e.s.Finish(e.ctx, id, store.Result{State: instance.Completed, StopReason: "completed",
			Usage: in.Usage, Cost: in.Cost, Turns: in.Turns}))
	}
	sameTotal(t, e, "r", nil)
	before := sumOver(t, e, "r")
	cSpent, aSpent := e.get("c"), e.get("a")
	if _, err := e.s.DeleteTree(e.ctx, "a"); err != nil {
		t.Fatalf("delete a: %v", err)
	}
	// a ended unpriced, c at 1.5.
	want := store.TreeTotal{Tokens: before.Tokens - cSpent.Usage.Total() - aSpent.Usage.Total(), USD: before.USD - *cSpent.Cost}
	if aSpent.Cost != nil || cSpent.Usage.Total() != 350 {
		t.Fatalf("a %+v, c %+v before the delete", aSpent, cSpent)
	}
	sameTotal(t, e, "r", &want)
	if _, err := e.s.DeleteTree(e.ctx, "r"); err != nil {
		t.Fatalf("delete r: %v", err)
	}
	_, err := e.s.TreeSpent(e.ctx, "r")
	wantErr(t, "tree total of a deleted tree", err, store.ErrNotFound)
	sameTotal(t, e, "other", &store.TreeTotal{})
}
