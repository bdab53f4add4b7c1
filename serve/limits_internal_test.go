package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// pipeListener hands out one end of a net.Pipe per Accept (the test keeps
// the other), or an error queued in errs first.
type pipeListener struct {
	errs   chan error
	remote chan net.Conn
	done   chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{errs: make(chan error, 8), remote: make(chan net.Conn, 8), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case err := <-l.errs:
		return nil, err
	default:
	}
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	a, b := net.Pipe()
	l.remote <- b
	return a, nil
}

func (l *pipeListener) Close() error   { close(l.done); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// conn is one accepted connection as the test sees it: the server's end,
// and the client's, which reads EOF once the server's end is closed.
type conn struct{ server, client net.Conn }

func accept(t *testing.T, ln net.Listener, pl *pipeListener) conn {
	t.Helper()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	r := <-pl.remote
	t.Cleanup(func() { c.Close(); r.Close() })
	return conn{c, r}
}

func closed(c conn) bool {
	c.client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.client.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// trusted makes c a connection an authenticated request came on, as the
// handler's wrapper does.
func trusted(hs *http.Server, c conn) {
	ctx := hs.ConnContext(context.Background(), c.server)
	ref := ctx.Value(connKey{}).(connRef)
	ref.t.trust(ref.tc)
}

// At the cap, the oldest unauthenticated connection goes first, then the
// authenticated one idle longest; one serving an authenticated request
// never does: then accepting waits until a connection ends.
func TestCapClosesUnauthenticatedThenIdle(t *testing.T) {
	pl := newPipeListener()
	hs := &http.Server{}
	ln := Harden(hs, pl, Limits{MaxConns: 3})
	defer ln.Close()

	busy := accept(t, ln, pl) // authenticated, in a request
	hs.ConnState(busy.server, http.StateNew)
	hs.ConnState(busy.server, http.StateActive)
	trusted(hs, busy)
	idle := accept(t, ln, pl) // authenticated, between requests
	hs.ConnState(idle.server, http.StateNew)
	hs.ConnState(idle.server, http.StateActive)
	trusted(hs, idle)
	hs.ConnState(idle.server, http.StateIdle)
	slow := accept(t, ln, pl) // no complete request yet
	hs.ConnState(slow.server, http.StateNew)

	fresh := accept(t, ln, pl)
	hs.ConnState(fresh.server, http.StateNew)
	if !closed(slow) || closed(idle) || closed(busy) {
		t.Fatalf("at the cap: the unauthenticated connection should go first (slow %v, idle %v, busy %v)", closed(slow), closed(idle), closed(busy))
	}
	hs.ConnState(fresh.server, http.StateActive)
	trusted(hs, fresh)
	next := accept(t, ln, pl)
	hs.ConnState(next.server, http.StateNew)
	if !closed(idle) || closed(busy) || closed(fresh) {
		t.Fatalf("then the idle authenticated one (idle %v, busy %v, fresh %v)", closed(idle), closed(busy), closed(fresh))
	}
	hs.ConnState(next.server, http.StateActive)
	trusted(hs, next)

	// All three serve authenticated requests: the next accept waits.
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("accepted a fourth connection while three serve authenticated requests")
	case <-time.After(100 * time.Millisecond):
	}
	hs.ConnState(busy.server, http.StateClosed)
	select {
	case c := <-got:
		c.Close()
		(<-pl.remote).Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no accept after a connection ended")
	}
}

// Out of descriptors below the cap, Accept closes an unauthenticated
// connection and tries again, instead of failing.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	pl := newPipeListener()
	hs := &http.Server{}
	ln := Harden(hs, pl, Limits{MaxConns: 100})
	defer ln.Close()
	slow := accept(t, ln, pl)
	hs.ConnState(slow.server, http.StateNew)
	pl.errs <- &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	pl.errs <- &net.OpError{Op: "accept", Net: "tcp", Err: syscall.ENFILE}
	accept(t, ln, pl)
	if !closed(slow) {
		t.Fatal("EMFILE: no unauthenticated connection was closed to make room")
	}
	// Another error is the server's to see.
	pl.errs <- errors.New("boom")
	if _, err := ln.Accept(); err == nil || err.Error() != "boom" {
		t.Fatalf("accept: %v, want boom", err)
	}
}

func TestMaxConnsFor(t *testing.T) {
	for _, tc := range []struct{ nofile, want int }{
		{20000, 4096}, {1024, 768}, {256, 16}, {4096, 3072}, {1 << 20, 4096},
	} {
		if got := maxConnsFor(tc.nofile); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}
