package serve

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// Limits bound what a client can hold of an HTTP server: descriptors,
// goroutines and time. An unauthenticated client gets next to nothing: its
// connection is the first to be closed when the cap is reached, and the
// body of an unauthenticated request is never drained (issue 16, item 5:
// 20,100 connections trickling bodies once exhausted the process's
// descriptors, and the tools' with them).
type Limits struct {
	// MaxConns caps the connections open at once. At the cap, accepting
	// one more first closes the oldest connection that has not
	// authenticated (waiting for its first request, between requests, or
	// in an unauthenticated one), else the authenticated connection idle
	// longest; either only once it has had MinConnAge to send its
	// request's headers (since it was accepted, or since its last request
	// ended), unless no candidate has. A connection serving an
	// authenticated request (an event stream, a wait) is never closed for
	// another, so an attacker cannot lock authenticated users out and new
	// connections are always accepted. Default: DefaultMaxConns().
	MaxConns int
	// HeaderTimeout bounds the reading of a request's headers, and of an
	// unauthenticated request's body. Default 10 s.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the reading of an authenticated request's body,
	// from its headers on (the largest, a 1 MiB JSON body, needs 35 KB/s).
	// It is a read deadline for the body only: what follows (an event
	// stream, a wait, an MCP stream) has no deadline, which is why the
	// server sets no ReadTimeout (net/http would cancel a stream's context
	// when it passed) and no WriteTimeout. Default 30 s.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	// Default 2 min.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's headers (431 over it): the token, a
	// session cookie and whatever cookies other local apps set on the host.
	// Default 64 KiB (net/http's is 1 MiB, times MaxConns).
	MaxHeaderBytes int
	// Authenticate says whether a request carries valid credentials, and
	// returns the request the handler is to see: it may carry what the
	// check found in its context, so the handler need not check again
	// (Server's does). nil counts every request as authenticated (a server
	// with no secret).
	Authenticate func(*http.Request) (*http.Request, bool)
	// Log hears about descriptors running out. Default: discarded.
	Log *slog.Logger
	// Clock times connections' ages (MinConnAge) and the descriptor
	// warnings; read deadlines are the network's, on the real clock.
	// Default: clock.Real.
	Clock clock.Clock
}

// MinConnAge is how long a connection has to send its request's headers
// (since it was accepted, or since its last request ended) before the cap
// may close it for another, unless every candidate is younger: a fresh
// client, authenticated or about to be, is not closed the moment it
// connects because unauthenticated ones arrived after it.
const MinConnAge = time.Second

// The descriptor budget. Connections get what the process's descriptor
// limit (RLIMIT_NOFILE; Go raises the soft limit to the hard one at
// start) leaves after a reserve for everything else: the database
// (SQLite: a few; Postgres: its pool), tool calls (a bash call holds about
// ten while it runs: its pipes, /dev/null, the process's own), MCP
// servers (three pipes each, per child that has one) and the runtime's
// own (epoll, the listener). The reserve is a quarter of the limit, at
// least reserveMin; connections are at most maxConnsCap, which no local
// or team server needs more of, and whose memory (about 20 KB each when
// idle) stays under 100 MB.
const (
	reserveMin  = 256
	maxConnsCap = 4096
	minConns    = 16
)

// DefaultMaxConns is MaxConns's default for this process: with the limit
// of 20,000 descriptors, 4,096 connections and 15,904 descriptors for the
// rest; with 1,024, 768 and 256.
func DefaultMaxConns() int { return maxConnsFor(nofile()) }

func maxConnsFor(nofile int) int {
	reserve := max(reserveMin, nofile/4)
	return min(maxConnsCap, max(minConns, nofile-reserve))
}

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns()
	}
	l.HeaderTimeout = cmp.Or(l.HeaderTimeout, 10*time.Second)
	l.BodyTimeout = cmp.Or(l.BodyTimeout, 30*time.Second)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, 2*time.Minute)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, 64<<10)
	if l.Log == nil {
		l.Log = slog.New(slog.DiscardHandler)
	}
	l.Clock = cmp.Or[clock.Clock](l.Clock, clock.Real)
	return l
}

// Harden sets hs's timeouts and header cap, wraps its handler with the
// body deadlines, and returns ln wrapped with the connection cap: serve
// with hs.Serve on the listener it returns. It sets hs.ConnState and
// hs.ConnContext (and calls a ConnState hs already had).
func Harden(hs *http.Server, ln net.Listener, l Limits) net.Listener {
	l = l.withDefaults()
	t := &conns{max: l.MaxConns, log: l.Log, clock: l.Clock, m: map[net.Conn]*tracked{}}
	t.room = sync.NewCond(&t.mu)
	hs.ReadHeaderTimeout = l.HeaderTimeout
	hs.IdleTimeout = l.IdleTimeout
	hs.MaxHeaderBytes = l.MaxHeaderBytes
	hs.Handler = bodyDeadlines(hs.Handler, l)
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, s http.ConnState) {
		t.state(c, s)
		if prev != nil {
			prev(c, s)
		}
	}
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		t.mu.Lock()
		tc := t.m[c]
		t.mu.Unlock()
		if tc == nil {
			return ctx
		}
		return context.WithValue(ctx, connKey{}, connRef{t, tc})
	}
	return &capListener{Listener: ln, t: t}
}

type connKey struct{}

type connRef struct {
	t  *conns
	tc *tracked
}

// bodyDeadlines gives a request's body a read deadline, authenticated or
// not, and marks the connection of an authenticated request as trusted.
func bodyDeadlines(next http.Handler, l Limits) http.Handler {
	if next == nil {
		next = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authed := true
		if l.Authenticate != nil {
			r, authed = l.Authenticate(r)
		}
		if ref, ok := r.Context().Value(connKey{}).(connRef); ok && authed {
			ref.t.trust(ref.tc)
		}
		if r.Body == nil || r.Body == http.NoBody {
			// Nothing to read: no deadline, which would otherwise end a
			// stream (net/http's background read would hit it).
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		limit := l.BodyTimeout
		if !authed {
			limit = min(limit, l.HeaderTimeout)
			// Only sign-in reads an unauthenticated body; anything else
			// answers without reading it. Closing the connection after the
			// answer spares net/http's drain (up to 256 KiB, read at the
			// sender's pace, to reuse the connection).
			w.Header().Set("Connection", "close")
		}
		_ = rc.SetReadDeadline(time.Now().Add(limit))
		b := &deadlineBody{ReadCloser: r.Body, rc: rc}
		r.Body = b
		next.ServeHTTP(w, r)
		if !authed && !b.eof {
			// What is left of the body is not read: the connection closes
			// now rather than when the deadline passes.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// deadlineBody lifts the body's read deadline once the body has been read
// to its end, so an answer that streams afterwards is not cut. A read that
// fails (the deadline passed) leaves the deadline in the past: the rest of
// the body is not waited for.
type deadlineBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	eof bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.eof {
		if errors.Is(err, io.EOF) {
			b.eof = true
			_ = b.rc.SetReadDeadline(time.Time{})
		} else {
			_ = b.rc.SetReadDeadline(time.Now())
		}
	}
	return n, err
}

// conns tracks the server's connections for the cap.
type conns struct {
	max   int
	log   *slog.Logger
	clock clock.Clock
	mu    sync.Mutex
	room  *sync.Cond // signalled when a connection goes
	m     map[net.Conn]*tracked
	// untrusted holds the connections no authenticated request has come
	// on, in accept order; idle the trusted ones between requests, the
	// longest idle first: each in the order of its connections' since. A
	// trusted connection in a request is in neither: it is never closed
	// for another.
	untrusted, idle list.List
	closed          bool
	lastLog         time.Time
}

type tracked struct {
	c       net.Conn
	trusted bool
	in      *list.List // untrusted, idle or nil
	el      *list.Element
	since   time.Time // accepted, or idle since: when its MinConnAge began
}

func (t *conns) unlist(tc *tracked) {
	if tc.in != nil {
		tc.in.Remove(tc.el)
		tc.in, tc.el = nil, nil
	}
}

func (t *conns) enlist(tc *tracked, l *list.List) {
	t.unlist(tc)
	tc.in, tc.el, tc.since = l, l.PushBack(tc), t.clock.Now()
}

func (t *conns) add(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tc := &tracked{c: c}
	t.m[c] = tc
	t.enlist(tc, &t.untrusted)
}

// forget drops a connection from the count; false if it was not counted.
func (t *conns) forget(c net.Conn) bool {
	tc := t.m[c]
	if tc == nil {
		return false
	}
	t.unlist(tc)
	delete(t.m, c)
	t.room.Broadcast()
	return true
}

func (t *conns) state(c net.Conn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tc := t.m[c]
	if tc == nil {
		return
	}
	switch s {
	case http.StateActive:
		if tc.trusted {
			t.unlist(tc)
		}
	case http.StateIdle:
		if tc.trusted {
			t.enlist(tc, &t.idle)
		}
	case http.StateClosed, http.StateHijacked:
		// A hijacked connection is its handler's: no longer the server's
		// to count or close (nothing in deputy hijacks).
		t.forget(c)
	}
}

func (t *conns) trust(tc *tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[tc.c]; !ok || tc.trusted {
		return
	}
	tc.trusted = true
	t.unlist(tc) // in a request now; idle when it ends
}

// victim picks the connection to close for a new one, and forgets it:
// the oldest untrusted one, else the longest idle, preferring either that
// has had MinConnAge (each list's front is its oldest); nil when every
// connection serves an authenticated request.
func (t *conns) victim() net.Conn {
	lists := []*list.List{&t.untrusted, &t.idle}
	now := t.clock.Now()
	var pick *tracked
	for _, l := range lists {
		if e := l.Front(); e != nil && now.Sub(e.Value.(*tracked).since) >= MinConnAge {
			pick = e.Value.(*tracked)
			break
		}
	}
	for _, l := range lists {
		if e := l.Front(); pick == nil && e != nil {
			pick = e.Value.(*tracked)
		}
	}
	if pick == nil {
		return nil
	}
	t.forget(pick.c)
	return pick.c
}

// makeRoom returns once a connection may be accepted: under the cap, or
// having closed one to get there. It waits while every connection serves
// an authenticated request.
func (t *conns) makeRoom() error {
	t.mu.Lock()
	for {
		if t.closed {
			t.mu.Unlock()
			return net.ErrClosed
		}
		if len(t.m) < t.max {
			t.mu.Unlock()
			return nil
		}
		if c := t.victim(); c != nil {
			t.mu.Unlock()
			c.Close()
			t.mu.Lock()
			continue
		}
		t.room.Wait()
	}
}

// shed closes the oldest untrusted connection (or the longest idle) when
// the process has run out of descriptors below the cap: something else
// (tools, the database) holds more than the reserve, and connections give
// way to it.
func (t *conns) shed(err error) {
	t.mu.Lock()
	c := t.victim()
	if now := t.clock.Now(); now.Sub(t.lastLog) >= 10*time.Second {
		t.lastLog = now
		t.log.Warn("serve: out of file descriptors below the connection cap; closing unauthenticated and idle connections",
			"err", err, "conns", len(t.m), "cap", t.max)
	}
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (t *conns) close() {
	t.mu.Lock()
	t.closed = true
	t.room.Broadcast()
	t.mu.Unlock()
}

// capListener accepts under the cap.
type capListener struct {
	net.Listener
	t *conns
}

func (l *capListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		if err := l.t.makeRoom(); err != nil {
			return nil, err
		}
		c, err := l.Listener.Accept()
		if err == nil {
			l.t.add(c)
			return c, nil
		}
		if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
			return nil, err
		}
		// Out of descriptors: the pending connection waits in the
		// kernel's queue while a connection gives way. Handled here, not
		// by net/http's retry, which would log every attempt and free
		// nothing.
		l.t.shed(err)
		backoff = min(max(2*backoff, 5*time.Millisecond), 200*time.Millisecond)
		time.Sleep(backoff)
	}
}

func (l *capListener) Close() error {
	l.t.close()
	return l.Listener.Close()
}
