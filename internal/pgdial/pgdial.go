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
package pgdial

import (
	"context"
	"net"
	"sync"
	"time"
)

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
