// Package serve is deputy's HTTP face: a JSON API under /api/ with
// server-sent events, the web dashboard at /, and the MCP server at /mcp,
// all behind one bearer token (docs/api.md is the reference).
//
// The server is a thin layer over a *deputy.Runtime: every request is one
// call of the library, and the live events come from the store's event
// feed (store.Event), which every process working on the database writes
// in the transactions of what the events report. So a stream resumed with
// Last-Event-ID misses nothing, and a dashboard sees instances that other
// processes run.
package serve

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/clock"
)

// Options configure a Server. Runtime and Token are required.
type Options struct {
	Runtime *deputy.Runtime
	// Token is the secret every request must carry (Authorization: Bearer)
	// or have exchanged for a session cookie (POST /api/session).
	Token string
	// MCP, when set, is mounted at /mcp behind the token check.
	MCP http.Handler
	// Web, when set, serves the dashboard at /.
	Web http.Handler
	// Clock times sessions and the streams' keep-alive pings.
	Clock clock.Clock
	// PollInterval is how often the event feed is read for events other
	// processes wrote (this process's own wake the reader at once).
	// Default 1 s.
	PollInterval time.Duration
	// Ping is the interval of the streams' keep-alive comments. Default 15 s.
	Ping time.Duration
	// SessionTTL is how long a browser session lasts. Default 24 h.
	SessionTTL time.Duration
	// Log receives what the server cannot tell a client: the event feed
	// failing to read, and reading again; descriptors running out.
	// Default: discarded.
	Log *slog.Logger
	// Limits bound connections and the time their requests may take, for
	// the http.Server Harden configures (Authenticate and Log are the
	// server's own; Clock defaults to the server's). See Limits for the defaults.
	Limits Limits
}

// Limits on request bodies: an API call is small; a definition file is a
// prompt, not a corpus.
const (
	maxBody           = 1 << 20
	maxDefinitionBody = 256 << 10
	// A sign-in body is a token: the one body read before authentication.
	maxSignInBody = 4 << 10
)

// Server serves the API, the events, the dashboard and MCP.
type Server struct {
	o        Options
	rt       *deputy.Runtime
	hub      *hub
	sessions *sessions
	mux      *http.ServeMux
	handler  http.Handler
}

// New makes a Server and starts following the event feed; Close stops it.
func New(o Options) (*Server, error) {
	if o.Runtime == nil {
		return nil, errors.New("serve: Options.Runtime is nil")
	}
	if len(o.Token) < 16 {
		return nil, errors.New("serve: Options.Token is missing or shorter than 16 characters")
	}
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real)
	o.PollInterval = cmp.Or(o.PollInterval, time.Second)
	o.Ping = cmp.Or(o.Ping, 15*time.Second)
	o.SessionTTL = cmp.Or(o.SessionTTL, 24*time.Hour)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, rt: o.Runtime, sessions: newSessions(o.Clock, o.SessionTTL), mux: http.NewServeMux()}
	h, err := newHub(o.Runtime, o.Clock, o.PollInterval, o.Log)
	if err != nil {
		return nil, err
	}
	s.hub = h
	s.routes()
	// Browsers send Sec-Fetch-Site/Origin: a state-changing request from
	// another site is refused before it reaches the cookie check.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "forbidden", "cross-origin request refused")
	}))
	protected := cop.Handler(s.mux)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer is exactly the type it says (JSON, the event
		// stream, the dashboard's assets): no browser may guess another.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		protected.ServeHTTP(w, r)
	})
	return s, nil
}

// Handler is the server's whole HTTP surface.
func (s *Server) Handler() http.Handler { return s.handler }

// Harden configures hs, whose Handler is the server's, with
// Options.Limits, the token deciding which connections are
// authenticated, and returns ln under the connection cap: serve with
// hs.Serve on the listener it returns.
func (s *Server) Harden(hs *http.Server, ln net.Listener) net.Listener {
	l := s.o.Limits
	l.Authenticate = s.authenticate
	l.Log = s.o.Log
	l.Clock = cmp.Or(l.Clock, s.o.Clock)
	return Harden(hs, ln, l)
}

// Close stops following the event feed and ends every open stream (an
// http.Server's Shutdown waits for streams, so call Close first).
func (s *Server) Close() { s.hub.close() }

func (s *Server) routes() {
	api := func(pattern string, h func(http.ResponseWriter, *http.Request)) {
		s.mux.Handle(pattern, s.auth(http.HandlerFunc(h)))
	}
	s.mux.HandleFunc("POST /api/session", s.signIn)
	api("GET /api/session", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"signed_in": true})
	})
	api("DELETE /api/session", s.signOut)

	api("POST /api/instances", s.startInstance)
	api("GET /api/instances", s.listInstances)
	api("GET /api/instances/{id}", s.getInstance)
	api("GET /api/instances/{id}/tree", s.getTree)
	api("GET /api/instances/{id}/transcript", s.getTranscript)
	api("GET /api/instances/{id}/relay", s.getRelay)
	api("GET /api/instances/{id}/attempts", s.getAttempts)
	api("POST /api/instances/{id}/pause", s.control(s.rt.Pause))
	api("POST /api/instances/{id}/resume", s.control(s.rt.Resume))
	api("POST /api/instances/{id}/cancel", s.control(s.rt.Cancel))
	api("POST /api/instances/{id}/send", s.send)
	api("POST /api/instances/{id}/answer", s.answer)
	api("POST /api/instances/{id}/approval", s.approval)

	api("GET /api/events", s.events(scopeAll))
	api("GET /api/instances/{id}/events", s.events(scopeInstance))
	api("GET /api/trees/{id}/events", s.events(scopeTree))

	api("GET /api/definitions", s.listDefinitions)
	api("GET /api/definitions/{name}", s.getDefinition)
	api("PUT /api/definitions/{name}", s.putDefinition)
	api("POST /api/definitions/validate", s.validateDefinition)

	if s.o.MCP != nil {
		s.mux.Handle("/mcp", s.auth(s.o.MCP))
	}
	// Everything else under /api/ is a JSON 404 (or 405), never the
	// dashboard's page.
	s.mux.HandleFunc("/api/", s.notFound)
	if s.o.Web != nil {
		s.mux.Handle("/", s.o.Web)
	} else {
		s.mux.HandleFunc("/", s.notFound)
	}
}

// notFound answers a path no route has, or a method its route does not
// take, in JSON.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(context.Background())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/api/" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "no such path: "+r.URL.Path)
}
