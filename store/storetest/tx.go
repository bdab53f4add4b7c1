package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// testAppendWithTx: an append on a caller's transaction (the durable
// engine's, on Postgres a native pgx one) writes nothing until it commits,
// nothing when it rolls back, and keeps AppendWith's checks and
// idempotence.
func testAppendWithTx(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("i", "")
	msg := llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("tu_1", "read", json.RawMessage(`{"path":"a"}`))}}
	w := store.With{Progress: &store.Progress{Turns: 1, ToolCalls: 1, Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}},
		Events: []store.NewEvent{{Kind: "tool_call", Data: json.RawMessage(`{"id":"tu_1"}`)}}}
	noErr(t, "append the task", e.s.AppendMessages(e.ctx, "i", 0, 0, []llm.Message{llm.UserText("go")}))
	begin := e.beginner()

	// Rolled back: nothing stored, nothing counted.
	tx, done := begin()
	noErr(t, "append on a tx", e.s.AppendWithTx(e.ctx, tx, "i", 1, 1, []llm.Message{msg}, w))
	done(false)
	if m, _ := e.s.Transcript(e.ctx, "i"); len(m) != 1 {
		t.Fatalf("a rolled back append left %d messages", len(m))
	}
	if in := e.get("i"); in.Turns != 0 {
		t.Fatalf("a rolled back append counted %d turns", in.Turns)
	}

	// Committed, then repeated: stored once, announced once.
	for range 2 {
		tx, done := begin()
		noErr(t, "append on a tx", e.s.AppendWithTx(e.ctx, tx, "i", 1, 1, []llm.Message{msg}, w))
		done(true)
		e.s.EventsCommitted()
	}
	m, err := e.s.Transcript(e.ctx, "i")
	noErr(t, "transcript", err)
	if len(m) != 2 || m[1].Content[0].ID != "tu_1" {
		t.Fatalf("transcript %+v", m)
	}
	if in := e.get("i"); in.Turns != 1 || in.ToolCalls != 1 || in.Usage.InputTokens != 7 {
		t.Fatalf("progress %d turns %d calls %+v", in.Turns, in.ToolCalls, in.Usage)
	}
	evs, err := e.s.Events(e.ctx, "i", 0, 0)
	noErr(t, "events", err)
	kinds := map[string]int{}
	for _, ev := range evs {
		kinds[ev.Kind]++
	}
	if kinds[store.EventProgress] != 1 || kinds["tool_call"] != 1 {
		t.Fatalf("events by kind %v", kinds)
	}

	// The checks hold on a caller's transaction too: a different message
	// at a stored seq, a gap, an unknown instance.
	tx, done = begin()
	other := llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Text("else")}}
	wantErr(t, "a different message", e.s.AppendWithTx(e.ctx, tx, "i", 1, 1, []llm.Message{other}, store.With{}), store.ErrConflict)
	done(false)
	tx, done = begin()
	wantErr(t, "a gap", e.s.AppendWithTx(e.ctx, tx, "i", 2, 5, []llm.Message{other}, store.With{}), store.ErrConflict)
	done(false)
	tx, done = begin()
	wantErr(t, "unknown instance", e.s.AppendWithTx(e.ctx, tx, "nobody", 1, 0, []llm.Message{other}, store.With{}), store.ErrNotFound)
	done(false)
}

// beginner begins transactions the way the durable engine's are: on
// Postgres a native pgx transaction on a connection of its own, on SQLite
// a database/sql one on the store's handle.
func (e *env) beginner() func() (store.Tx, func(commit bool)) {
	e.t.Helper()
	if e.s.Dialect() == store.Postgres {
		conn, err := pgx.Connect(e.ctx, e.url)
		noErr(e.t, "connect", err)
		e.t.Cleanup(func() { conn.Close(context.Background()) })
		return func() (store.Tx, func(bool)) {
			tx, err := conn.Begin(e.ctx)
			noErr(e.t, "begin", err)
			return pgxTx{tx}, func(commit bool) { end(e.t, commit, tx.Commit, tx.Rollback) }
		}
	}
	return func() (store.Tx, func(bool)) {
		tx, err := e.s.DB().BeginTx(e.ctx, nil)
		noErr(e.t, "begin", err)
		ctxless := func(f func() error) func(context.Context) error { return func(context.Context) error { return f() } }
		return sqlTx{tx}, func(commit bool) { end(e.t, commit, ctxless(tx.Commit), ctxless(tx.Rollback)) }
	}
}

func end(t *testing.T, commit bool, c, r func(context.Context) error) {
	t.Helper()
	if commit {
		noErr(t, "commit", c(context.Background()))
		return
	}
	noErr(t, "rollback", r(context.Background()))
}

type sqlTx struct{ tx *sql.Tx }

func (s sqlTx) Exec(ctx context.Context, q string, args ...any) (store.TxResult, error) {
	return s.tx.ExecContext(ctx, q, args...)
}

func (s sqlTx) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	return s.tx.QueryContext(ctx, q, args...)
}

func (s sqlTx) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return s.tx.QueryRowContext(ctx, q, args...)
}

type pgxTx struct{ tx pgx.Tx }

func (p pgxTx) Exec(ctx context.Context, q string, args ...any) (store.TxResult, error) {
	tag, err := p.tx.Exec(ctx, q, args...)
	return rowsAffected(tag.RowsAffected()), err
}

func (p pgxTx) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	rows, err := p.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

func (p pgxTx) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return p.tx.QueryRow(ctx, q, args...)
}

type rowsAffected int64

func (n rowsAffected) RowsAffected() (int64, error) { return int64(n), nil }

type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() error { r.Rows.Close(); return nil }
