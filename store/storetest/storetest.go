// Package storetest is the conformance suite every store dialect must pass,
// as River's riverdrivertest is for its drivers: one set of tests, run by
// store/sqlite_test.go against SQLite files and by store/postgres_test.go
// against Postgres, so the two cannot drift apart.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/store"
)

// Harness gives the suite databases of one dialect.
type Harness struct {
	// NewURL returns the URL of a fresh, empty database that lives until
	// the test ends.
	NewURL func(t testing.TB) string
	// Raw opens url with the bare driver (no migrations), to look at and
	// tamper with a database behind the store's back. The suite closes it.
	Raw func(t testing.TB, url string) *sql.DB
	// Lock holds the database at url locked as another process would (on
	// SQLite an exclusive transaction, on Postgres a table lock) until
	// release is called.
	Lock func(t testing.TB, url string) (release func())
}

// Epoch is the fake clock's start in the suite's stores.
var Epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// Run runs the whole suite. Every subtest is parallel and has databases of
// its own.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Instances", testInstances},
		{"InstanceConflicts", testInstanceConflicts},
		{"ListInstances", testListInstances},
		{"CreationOrder", testCreationOrder},
		{"Progress", testProgress},
		{"TreeTotals", testTreeTotals},
		{"CreateInstances", testCreateInstances},
		{"LegalTransitions", testLegalTransitions},
		{"IllegalTransitions", testIllegalTransitions},
		{"TerminalNeverChanges", testTerminalNeverChanges},
		{"ConcurrentTransitions", testConcurrentTransitions},
		{"Finish", testFinish},
		{"FinishTells", testFinishTells},
		{"DamagedArtifacts", testDamagedArtifacts},
		{"Atomicity", testAtomicity},
		{"Transcript", testTranscript},
		{"Compactions", testCompactions},
		{"Attempts", testAttempts},
		{"Runs", testRuns},
		{"Definitions", testDefinitions},
		{"Events", testEvents},
		{"StoreEvents", testStoreEvents},
		{"EventOrder", testEventOrder},
		{"Mailbox", testMailbox},
		{"Deliver", testDeliver},
		{"AppendWithTx", testAppendWithTx},
		{"ConcurrentConsume", testConcurrentConsume},
		{"NotFound", testNotFound},
		{"Migrations", testMigrations},
		{"ConcurrentOpen", testConcurrentOpen},
		{"NewerSchema", testNewerSchema},
		{"Locked", testLocked},
		{"Workers", testWorkers},
		{"WorkerLeaving", testWorkerLeaving},
		{"ConcurrentClaims", testConcurrentClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// env is one test's store on a fresh database, with its fake clock.
type env struct {
	t     *testing.T
	h     Harness
	url   string
	s     *store.Store
	clock *clock.Fake
	ctx   context.Context
}

func newEnv(t *testing.T, h Harness) *env {
	e := &env{t: t, h: h, url: h.NewURL(t), clock: clock.NewFake(Epoch), ctx: context.Background()}
	e.s = e.open(store.Options{})
	return e
}

// open opens the env's database with opts (and the env's clock); the
// store is closed when the test ends.
func (e *env) open(opts store.Options) *store.Store {
	e.t.Helper()
	s, err := e.tryOpen(opts)
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	return s
}

func (e *env) tryOpen(opts store.Options) (*store.Store, error) {
	if opts.Clock == nil {
		opts.Clock = e.clock
	}
	s, err := store.Open(e.ctx, e.url, opts)
	if err == nil {
		e.t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// raw opens the env's database with the bare driver.
func (e *env) raw() *sql.DB {
	db := e.h.Raw(e.t, e.url)
	e.t.Cleanup(func() { db.Close() })
	return db
}

// create records a root instance id, or a child of parent.
func (e *env) create(id, parent string) *instance.Record {
	e.t.Helper()
	in := &instance.Record{ID: id, Parent: parent, Type: "worker", Task: "task of " + id, Mode: "isolated", Model: "fake:m"}
	if err := e.s.CreateInstance(e.ctx, in); err != nil {
		e.t.Fatalf("create %s: %v", id, err)
	}
	return in
}

// get reads instance id.
func (e *env) get(id string) *instance.Record {
	e.t.Helper()
	in, err := e.s.GetInstance(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return in
}

// move transitions id to `to`, failing the test on error.
func (e *env) move(id string, to instance.State) {
	e.t.Helper()
	if err := e.s.Transition(e.ctx, id, to, "test"); err != nil {
		e.t.Fatalf("move %s to %s: %v", id, to, err)
	}
}

// pathTo is a way to reach each state from created by legal moves.
var pathTo = map[instance.State][]instance.State{
	instance.Created:   nil,
	instance.Running:   {instance.Running},
	instance.Asking:    {instance.Running, instance.Asking},
	instance.Paused:    {instance.Running, instance.Paused},
	instance.Completed: {instance.Running, instance.Completed},
	instance.Failed:    {instance.Running, instance.Failed},
	instance.TimedOut:  {instance.Running, instance.TimedOut},
	instance.Cancelled: {instance.Cancelled},
}

// createIn creates instance id and drives it to state st.
func (e *env) createIn(id string, st instance.State) {
	e.t.Helper()
	e.create(id, "")
	for _, s := range pathTo[st] {
		e.move(id, s)
	}
}

// transitions reads id's transitions.
func (e *env) transitions(id string) []store.Transition {
	e.t.Helper()
	ts, err := e.s.Transitions(e.ctx, id)
	if err != nil {
		e.t.Fatalf("transitions of %s: %v", id, err)
	}
	return ts
}

// wantErr fails unless err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// noErr fails on err.
func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ptr[T any](v T) *T { return &v }
