package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
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

// A connection has MinConnAge to send its headers before the cap closes
// it for another: an idle authenticated connection that has had it goes
// before a younger unauthenticated one, and when none has, the order is
// the cap's usual one.
func TestCapSparesYoungConnections(t *testing.T) {
	pl := newPipeListener()
	hs := &http.Server{}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ln := Harden(hs, pl, Limits{MaxConns: 3, Clock: clk})
	defer ln.Close()

	idle := accept(t, ln, pl)
	hs.ConnState(idle.server, http.StateNew)
	hs.ConnState(idle.server, http.StateActive)
	trusted(hs, idle)
	hs.ConnState(idle.server, http.StateIdle)
	clk.Advance(2 * MinConnAge)
	a := accept(t, ln, pl) // unauthenticated, young
	hs.ConnState(a.server, http.StateNew)
	b := accept(t, ln, pl)
	hs.ConnState(b.server, http.StateNew)

	c := accept(t, ln, pl)
	hs.ConnState(c.server, http.StateNew)
	if !closed(idle) || closed(a) || closed(b) {
		t.Fatalf("the idle connection that had its age should go before young ones (idle %v, a %v, b %v)", closed(idle), closed(a), closed(b))
	}
	// Every candidate is young: the oldest goes, as without an age.
	clk.Advance(MinConnAge / 2)
	d := accept(t, ln, pl)
	hs.ConnState(d.server, http.StateNew)
	if !closed(a) || closed(b) || closed(c) {
		t.Fatalf("all young: the oldest should go (a %v, b %v, c %v)", closed(a), closed(b), closed(c))
	}
	// An authenticated connection that just finished a request is young
	// again: the unauthenticated one that has had its age goes first.
	hs.ConnState(d.server, http.StateActive)
	trusted(hs, d)
	clk.Advance(MinConnAge)
	hs.ConnState(d.server, http.StateIdle)
	e := accept(t, ln, pl)
	hs.ConnState(e.server, http.StateNew)
	if !closed(b) || closed(c) || closed(d) {
		t.Fatalf("the unauthenticated one that had its age should go before a just-idle one (b %v, c %v, d %v)", closed(b), closed(c), closed(d))
	}
}

// Harden's handler hands on the request its Authenticate returned, and
// checks once.
func TestAuthenticateRunsOnceAndHandsOnItsRequest(t *testing.T) {
	type key struct{}
	var calls int
	var saw any
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw = r.Context().Value(key{})
	})}
	Harden(hs, newPipeListener(), Limits{Authenticate: func(r *http.Request) (*http.Request, bool) {
		calls++
		return r.WithContext(context.WithValue(r.Context(), key{}, "checked")), true
	}})
	hs.Handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if calls != 1 || saw != "checked" {
		t.Fatalf("Authenticate called %d times, the handler saw %v", calls, saw)
	}
}

// auth takes the verdict its server's authenticate carried, without
// checking again, and no other server's.
func TestAuthReadsTheCarriedVerdict(t *testing.T) {
	s := &Server{o: Options{Token: "0123456789abcdef"}, sessions: newSessions(clock.Real, time.Hour)}
	other := &Server{o: s.o, sessions: s.sessions}
	h := s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want int
	}{
		{"this server's verdict", context.WithValue(context.Background(), credKey{s}, credOK), 204},
		{"another server's", context.WithValue(context.Background(), credKey{other}, credOK), 401},
		{"none carried", context.Background(), 401},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/api/instances", nil).WithContext(tc.ctx))
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.want)
		}
	}
	// authenticate's request carries what it found.
	r := httptest.NewRequest("GET", "/api/instances", nil)
	r.Header.Set("Authorization", "Bearer "+s.o.Token)
	r2, ok := s.authenticate(r)
	if c, _ := r2.Context().Value(credKey{s}).(cred); !ok || c != credOK {
		t.Fatalf("authenticate: %v, carried %v", ok, c)
	}
}
