package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxStmts bounds the query texts stmts keeps: the store's statements are
// constant texts but for a few built per call (lists of ids), which must
// not grow the cache without end.
const maxStmts = 128

// stmts are the store's prepared statements on SQLite, whose driver
// otherwise compiles a statement's SQL at every call (a fifth of a durable
// run's CPU in issue 19's profile). Postgres needs none: pgx keeps a
// statement cache of its own per connection.
//
// A text is prepared once per *sql.DB, the first time it is run, in a
// goroutine of its own and outside any transaction: a transaction that
// prepared through the pool would wait for a second connection while
// holding one (and SQLite's write lock), which the connections waiting for
// that lock may all hold. The first run goes unprepared; later ones, in a
// transaction too (tx.StmtContext, which prepares it once on each
// connection), use the statement. Safe for concurrent use.
type stmts struct {
	db      *sql.DB
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
	closed  bool
	wg      sync.WaitGroup
}

func newStmts(db *sql.DB) *stmts {
	return &stmts{db: db, m: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// lookup returns query's statement, nil while it is not prepared (its
// preparation then starts, unless the cache is full).
func (c *stmts) lookup(query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok || c.closed || c.pending[query] || len(c.m)+len(c.pending) >= maxStmts {
		return st
	}
	c.pending[query] = true
	c.wg.Add(1)
	go c.prepare(query)
	return nil
}

func (c *stmts) prepare(query string) {
	defer c.wg.Done()
	st, err := c.db.PrepareContext(context.Background(), query)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, query)
	if err != nil {
		// Run unprepared from now on (it failed to compile: it will fail
		// at its call too, with the error said there).
		c.m[query] = nil
		return
	}
	if c.closed {
		st.Close()
		return
	}
	c.m[query] = st
}

// close waits for the preparations under way and closes every statement,
// before the database handle closes.
func (c *stmts) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		if st != nil {
			st.Close()
		}
		delete(c.m, q)
	}
}

// prepared returns the statement to run query with on q's executor, nil
// when there is none (not SQLite, not prepared yet, or an executor that
// is neither the pool nor one of its transactions).
func (q querier) prepared(ctx context.Context, query string) *sql.Stmt {
	if q.c == nil {
		return nil
	}
	switch x := q.x.(type) {
	case *sql.DB:
		return q.c.lookup(query)
	case *sql.Tx:
		if st := q.c.lookup(query); st != nil {
			return x.StmtContext(ctx, st)
		}
	}
	return nil
}
