package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/store"
)

// When the engine's records cannot be deleted, rm deletes nothing: the
// tree is still there, so the same rm run again (here once DBOS can be
// reached) removes it whole. The failure is made by giving removeTree a
// database path DBOS cannot open a handle of its own on (a directory).
func TestRmThatCannotForgetLeavesTheTreeToRetry(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dbFile(ws), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = removeTree(ctx, st, t.TempDir(), id)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailed || !strings.Contains(err.Error(), "nothing removed") {
		t.Fatalf("rm with the engine out of reach: %v; want exit %d, nothing removed", err, exitFailed)
	}
	if _, err := st.GetInstance(ctx, id); err != nil {
		t.Fatalf("after the failed rm, %s: %v; want it still there to retry on", id, err)
	}
	d, err := removeTree(ctx, st, dbFile(ws), id)
	if err != nil || len(d.Instances) == 0 || d.Instances[0] != id {
		t.Fatalf("rm again: %+v, %v", d, err)
	}
	if _, err := st.GetInstance(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after rm, %s: %v; want ErrNotFound", id, err)
	}
}
