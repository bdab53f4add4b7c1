// Package pgdial dials deputy's Postgres connections, every one of them in
// the process (the store's and DBOS's), and can abort them all at once.
//
// A worker that loses its lease must write nothing more. Exiting is not
// enough on its own: what it wrote to a socket just before (while cut off
// from the database, say) stays in the kernel's send buffer after the
// process is gone, and a closing socket still delivers it once the network
// heals: a COMMIT arriving after another worker took the work over. Abort
// sets SO_LINGER to zero on every connection and closes it, which throws
// the unsent data away and resets the connection instead.
//
// Nor may a worker cut off from the database hold anything there that the
// others wait for: Configure asks the server to end a session that sits
// in a transaction (holding its row and advisory locks).
package pgdial

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// IdleInTransaction is how long the server lets a session sit in an open
// transaction before ending it. deputy's transactions run their statements
// back to back (milliseconds), so a session idle that long in one belongs
// to a client that is gone or cut off, and its locks (the event feed's
// advisory lock, rows being updated) would stall every other worker until
// the server noticed. Not shorter: a live process starved of CPU (2 cores,
// every test under -race) was seen to stall for seconds, and a session
// ended under a live writer fails its write. The store's lock waits (5 s
// by default) are tried three times, so a writer waiting on a cut-off
// session's lock outlasts it.
const IdleInTransaction = 10 * time.Second

// Configure dials cfg's connections through Dial and sets
// idle_in_transaction_session_timeout to IdleInTransaction, unless the URL
// gave its own. Server-side TCP keepalives are left as they are: a session
// lock (setup.LockEngine's) must not end with a network blip of seconds,
// and deputy's workers hold none for long.
func Configure(cfg *pgconn.Config) {
	cfg.DialFunc = Dial
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(IdleInTransaction.Milliseconds(), 10)
	}
}

var (
	mu    sync.Mutex
	conns = map[*net.TCPConn]struct{}{}
)

// Dial is a pgconn DialFunc that keeps track of the connection.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil // a Unix socket: local, nothing to deliver late
	}
	mu.Lock()
	conns[tc] = struct{}{}
	mu.Unlock()
	return &tracked{TCPConn: tc}, nil
}

type tracked struct{ *net.TCPConn }

func (t *tracked) Close() error {
	mu.Lock()
	delete(conns, t.TCPConn)
	mu.Unlock()
	return t.TCPConn.Close()
}

// Abort resets every open connection, discarding what is not yet sent.
func Abort() {
	mu.Lock()
	defer mu.Unlock()
	for c := range conns {
		_ = c.SetLinger(0)
		_ = c.Close()
		delete(conns, c)
	}
}

// Open reports how many connections are open (for tests).
func Open() int {
	mu.Lock()
	defer mu.Unlock()
	return len(conns)
}
