package durable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/store"
)

// A child whose recorded artifact list does not decode (a damaged row)
// still reports its end, the report saying the list could not be read,
// rather than passing for a child that wrote no files.
func TestDamagedArtifactsAreSaidInTheRelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, in := range []*instance.Record{{ID: "i-root", Type: "root", Task: "t"}, {ID: "i-kid", Parent: "i-root", Type: "general-purpose", Task: "t"}} {
		if err := st.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Finish(ctx, "i-kid", store.Result{State: instance.Completed, Report: "wrote a.go", Artifacts: []string{"a.go"}}); err != nil {
		t.Fatal(err)
	}
	e := &Engine{st: st}
	relay := func() string {
		t.Helper()
		in, err := st.GetInstance(ctx, "i-kid")
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.status(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return s.Relay
	}
	if r := relay(); !strings.Contains(r, "artifacts: a.go") || strings.Contains(r, "damaged") {
		t.Fatalf("the sound record's relay: %s", r)
	}
	// Valid JSON (the store checks that much as it writes), not a list.
	if _, err := st.DB().ExecContext(ctx, `UPDATE deputy_instances SET artifacts = ? WHERE id = ?`, `{"a.go": true}`, "i-kid"); err != nil {
		t.Fatal(err)
	}
	r := relay()
	if strings.Contains(r, "artifacts:") || !strings.Contains(r, "wrote a.go") ||
		!strings.Contains(r, "record is damaged: its artifacts (the files it wrote) could not be read") {
		t.Fatalf("the damaged record's relay: %s", r)
	}
}

// A background child's workflow that ends in error (its end could not be
// recorded either) is logged; a shutdown or a run owned elsewhere is not.
func TestBackgroundChildFailureIsLogged(t *testing.T) {
	t.Parallel()
	var logged []string
	e := &Engine{log: func(msg string, args ...any) { logged = append(logged, msg+fmt.Sprint(args...)) }}
	e.backgroundEnded("i-ok", nil)
	e.backgroundEnded("i-elsewhere", fmt.Errorf("run: %w", dbos.ErrWorkflowCancelled))
	e.backgroundEnded("i-broken", errors.New("the store is gone"))
	e.closed.Store(true)
	e.backgroundEnded("i-shutdown", context.Canceled)
	if len(logged) != 1 || !strings.Contains(logged[0], "i-broken") || !strings.Contains(logged[0], "the store is gone") {
		t.Fatalf("logged %q", logged)
	}
}
