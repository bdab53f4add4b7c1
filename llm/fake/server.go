package fake

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// Options configures a Server. The zero value is a working server: no
// authentication, the built-in greeting Responder, the real clock, no
// latency, no faults.
type Options struct {
	// Responder decides every answer. Nil means a built-in Responder that
	// answers "Hello from deputy's fake model." and ends the turn.
	Responder Responder
	// APIKey, when set, must arrive as "x-api-key: KEY" or
	// "Authorization: Bearer KEY" (either header, on either wire); anything
	// else is a 401 authentication error in the provider's shape.
	APIKey string
	// Clock times latency, faults and prompt-cache expiry. Nil means
	// clock.Real; tests pass a *clock.Fake.
	Clock clock.Clock

	// MinCacheTokens is the shortest prefix the prompt-cache simulator will
	// cache (both wires). Zero means 1024, the documented minimum of most
	// Claude models and of OpenAI's automatic caching.
	MinCacheTokens int

	// FirstByte delays every response's headers; PerToken delays each output
	// token (a stream spreads it over its deltas). A Reply's own non-zero
	// FirstByte or PerToken replaces these for that request.
	FirstByte time.Duration
	PerToken  time.Duration

	// FaultRate is the probability (0..1) that a request fails with
	// RandomFault, drawn from a generator seeded with Seed, so a run is
	// repeatable. RandomFault.Kind defaults to FaultServerError.
	FaultRate   float64
	RandomFault Fault
	// Faults injects a fault into given requests, keyed by request number
	// (RequestInfo.N, from 1). It wins over FaultRate and over a Reply's
	// Fault.
	Faults map[int]Fault

	// MaxDelta bounds the size of streamed deltas: text deltas carry 1 to
	// MaxDelta runes, tool-input fragments 1 to MaxDelta bytes (cut anywhere
	// in the JSON, after a first empty fragment on the Anthropic wire). Zero
	// means 16. Sizes are drawn from a generator seeded with Seed and the
	// request number, so a stream is the same on every run.
	MaxDelta int
	// Seed makes IDs, delta sizes and random faults repeatable.
	Seed uint64

	// MaxLogged and MaxLogBytes bound the request log Requests returns, so
	// a long-running server does not grow without end: the most recent
	// requests are kept, at most MaxLogged of them (zero means 10,000;
	// negative keeps none) holding at most MaxLogBytes (zero means 256 MiB;
	// negative: no bound by bytes). An entry weighs its answer and twice its
	// body, the decoded Request being a second copy of the conversation.
	// The newest entry is kept even when it alone is heavier.
	MaxLogged   int
	MaxLogBytes int64
	// Log, when set, receives one JSON line (a LogEntry) per exchange as it
	// ends: the request, its answer and how long it took, credentials
	// redacted. Lines are written whole, one Write each, in the order the
	// exchanges ended, and flushed when Log can flush (bufio.Writer), so
	// `tail -f` on a file sees each at once. A failed write is not retried
	// and does not fail the request: LogErr reports the first.
	Log io.Writer
}

// Server is the fake model API: an http.Handler serving
//
//	POST /v1/messages               Anthropic Messages (JSON and SSE)
//	POST /v1/messages/count_tokens  Anthropic token counting
//	POST /v1/chat/completions       OpenAI Chat Completions (JSON and SSE)
//	POST /v1/responses              OpenAI Responses (JSON and SSE)
//	GET, DELETE /v1/responses/{id}  a stored response; GET …/{id}/input_items
//	GET /v1/models[/{id}]           either wire's model list, by its headers
//	GET, DELETE /_deputy/requests   the request log, for tests in any language
//
// A request is authenticated, read, decoded and validated as the real API
// does it (refusals are 4xx in the provider's error shape and never reach
// the Responder), then numbered: RequestInfo.N counts the generation
// requests that passed validation, from 1. A fault from Options.Faults or
// Options.FaultRate is decided next; the status faults (rate_limit,
// overloaded, server_error) answer at once without asking the Responder, as
// the model never ran. Otherwise the Responder's Reply is encoded, and a
// Reply.Fault applies when the server chose none.
//
// Tool call IDs a Reply sets are sent as they are; empty ones get the
// wire's style (toolu_01…, call_…). A stop sequence in the text (unless the
// Reply pins StopReason) and the request's max_tokens (always) end the
// content early, as the APIs do; the scripted model ends it the same way. A stream-only fault on a non-streaming request
// becomes what a client would see instead: error_event is a 529 (503 on
// the OpenAI wire), malformed_json half a body, cut_stream a cut body.
// OpenAI's n is ignored: there is always one choice.
//
// Server is safe for concurrent use.
type Server struct {
	opts      Options
	clock     clock.Clock
	responder Responder
	cache     *promptCache
	// threadStore keeps the Messages API's threads (thread.continue);
	// respStore the Responses API's stored responses
	// (previous_response_id). Each server its own, as each account.
	threadStore *threadStore
	respStore   *respStore
	maxDelta    int

	mu       sync.Mutex
	n        int        // generation requests numbered so far
	log      []*logSlot // oldest first, within maxLog and maxLogBytes
	logBytes int64      // the log's entries' weight (logSlot.size)
	maxLog   int
	maxBytes int64 // 0: no bound by bytes
	faultRNG *rand.Rand
	idRNG    *rand.Rand
	seq      int // exchanges ended so far (LoggedRequest.Seq)

	logMu  sync.Mutex // orders Options.Log's lines; taken before mu
	logErr error      // Options.Log's first failed write
}

// LoggedRequest is one request as the server received it, for tests that
// check what a client sent.
type LoggedRequest struct {
	// N is the request's number (RequestInfo.N); 0 for requests that do not
	// generate (count_tokens, or requests rejected before numbering).
	N        int
	Provider Provider
	Method   string
	Path     string
	// Status is the HTTP status the server answered (200 for a stream that
	// a fault later cut or ended with an error event); 0 while the request
	// waits out its first-byte latency, so a test that sees the server
	// waiting also sees the request.
	Status int
	// Header holds the request headers with credential values redacted.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Request is the decoded request; nil when the body did not decode.
	Request *llm.Request
	Stream  bool
	// Fault is the fault injected into this request, if any.
	Fault *Fault

	// Seq numbers the exchanges in the order they ended, from 1 (what
	// GET /_deputy/requests?since=N counts); 0 while the answer is being
	// sent.
	Seq int
	// Time is when the request arrived, on Options.Clock.
	Time time.Time
	// Latency is from the request's arrival to its answer's last byte, on
	// Options.Clock, so it includes the simulated delays; set at the end.
	Latency time.Duration
	// Answer is the response body as sent (a stream's SSE frames as
	// framed), at most maxAnswerLogged bytes: AnswerCut says there was
	// more. AnswerType is its Content-Type.
	Answer     []byte
	AnswerCut  bool
	AnswerType string
}

// NewServer returns a server configured by opts.
func NewServer(opts Options) *Server {
	s := &Server{opts: opts, clock: opts.Clock, responder: opts.Responder, maxDelta: opts.MaxDelta}
	s.opts.Faults = maps.Clone(opts.Faults) // the caller may reuse its map
	if s.clock == nil {
		s.clock = clock.Real
	}
	if s.responder == nil {
		s.responder = greeter{}
	}
	if s.maxDelta <= 0 {
		s.maxDelta = 16
	}
	switch {
	case opts.MaxLogged == 0:
		s.maxLog = 10_000
	case opts.MaxLogged > 0:
		s.maxLog = opts.MaxLogged
	}
	switch {
	case opts.MaxLogBytes == 0:
		s.maxBytes = defaultMaxLogBytes
	case opts.MaxLogBytes > 0:
		s.maxBytes = opts.MaxLogBytes
	}
	min := opts.MinCacheTokens
	if min <= 0 {
		min = 1024
	}
	s.cache = newPromptCache(s.clock, min)
	s.threadStore, s.respStore = newThreadStore(), newRespStore()
	s.faultRNG = rand.New(rand.NewPCG(opts.Seed, 0x6661756c74))
	s.idRNG = rand.New(rand.NewPCG(opts.Seed, 0x6964))
	return s
}

// greeter is the Responder used when Options.Responder is nil.
type greeter struct{}

func (greeter) Respond(*llm.Request, RequestInfo) Reply {
	return Reply{Content: []llm.Block{llm.Text("Hello from deputy's fake model.")}}
}

// Requests returns a copy of the logged requests (the most recent, within
// Options.MaxLogged and Options.MaxLogBytes), oldest first. A request is logged when its status is
// decided, before its body is sent, or earlier, with Status 0, when it
// begins waiting out a first-byte latency.
func (s *Server) Requests() []LoggedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LoggedRequest, 0, len(s.log))
	for _, e := range s.log {
		out = append(out, e.entry)
	}
	return out
}

// Listen serves s on addr (such as "127.0.0.1:0") until the returned close
// function is called. It returns the server's root URL, for example
// "http://127.0.0.1:41234": that is the Anthropic SDK's base URL, and
// url+"/v1" is the OpenAI SDK's. close stops accepting, drops open
// connections (aborting streams and latency waits in progress) and returns
// once every handler has returned.
func (s *Server) Listen(addr string) (url string, close func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("fake server: listen %s: %w", addr, err)
	}
	// handlers counts running handlers so close can wait for them; closed,
	// set under mu before that wait, keeps a request read just before the
	// close from starting one after it.
	var (
		handlers sync.WaitGroup
		mu       sync.Mutex
		closed   bool
	)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if closed {
				mu.Unlock()
				panic(http.ErrAbortHandler)
			}
			handlers.Add(1)
			mu.Unlock()
			defer handlers.Done()
			s.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var once sync.Once
	var closeErr error
	close = func() error {
		once.Do(func() {
			closeErr = hs.Close()
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) && closeErr == nil {
				closeErr = err
			}
			mu.Lock()
			closed = true
			mu.Unlock()
			handlers.Wait()
		})
		return closeErr
	}
	return "http://" + ln.Addr().String(), close, nil
}

// maxBodyBytes is the Messages API's request size limit.
const maxBodyBytes = 32 << 20

// ServeHTTP routes a request to the wire it belongs to.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/_deputy/requests" {
		// deputy's own endpoint, for tests written in other languages: it is
		// not a provider's and is not logged as a request.
		s.serveRequestLog(rw, r)
		return
	}
	// Every exchange's answer is kept as it is written, and the exchange
	// logged whole when the handler returns, whichever way (a cut stream
	// returns by panicking with http.ErrAbortHandler).
	w := &answerRecorder{ResponseWriter: rw}
	arrived := s.clock.Now()
	var ex *exchange
	defer func() { s.ended(ex, w, arrived) }()
	s.route(w, r, path, func(p Provider) *exchange {
		ex = &exchange{s: s, w: w, r: r, entry: LoggedRequest{Provider: p, Method: r.Method, Path: r.URL.Path, Header: redact(r.Header), Time: arrived}}
		return ex
	})
}

// route answers a request on the wire its path belongs to; newExchange
// starts its exchange once the wire is known.
func (s *Server) route(w http.ResponseWriter, r *http.Request, path string, newExchange func(Provider) *exchange) {
	switch {
	case path == "/v1/models" || strings.HasPrefix(path, "/v1/models/"):
		ex := newExchange(modelsWire(r.Header))
		if r.Method != http.MethodGet {
			ex.w.Header().Set("Allow", http.MethodGet)
			ex.fail(apiErr(http.StatusMethodNotAllowed, "Method Not Allowed"))
			return
		}
		if !s.authorized(r.Header) {
			ex.fail(authErr(r.Header))
			return
		}
		s.models(ex, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/models"), "/"))
		return
	case strings.HasPrefix(path, "/v1/responses/"):
		ex := newExchange(OpenAI)
		if !s.authorized(r.Header) {
			ex.fail(authErr(r.Header))
			return
		}
		s.openaiResponseByID(ex, strings.TrimPrefix(path, "/v1/responses/"))
		return
	}
	var p Provider
	switch path {
	case "/v1/messages", "/v1/messages/count_tokens":
		p = Anthropic
	case "/v1/chat/completions", "/v1/responses":
		p = OpenAI
	default:
		p = Anthropic
		if strings.HasPrefix(path, "/v1/chat") {
			p = OpenAI
		}
		newExchange(p).fail(apiErr(http.StatusNotFound, "Not found"))
		return
	}
	ex := newExchange(p)
	if r.Method != http.MethodPost {
		ex.w.Header().Set("Allow", http.MethodPost)
		ex.fail(apiErr(http.StatusMethodNotAllowed, "Method Not Allowed"))
		return
	}
	if !s.authorized(r.Header) {
		ex.fail(authErr(r.Header))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	ex.entry.Body = body
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			ex.fail(apiErr(http.StatusRequestEntityTooLarge, "Request exceeds the maximum allowed number of bytes."))
			return
		}
		ex.fail(apiErr(http.StatusBadRequest, "could not read the request body: "+err.Error()))
		return
	}
	switch path {
	case "/v1/messages":
		s.anthropicMessages(ex)
	case "/v1/messages/count_tokens":
		s.anthropicCountTokens(ex)
	case "/v1/responses":
		s.openaiResponses(ex)
	default:
		s.openaiChat(ex)
	}
}

// authorized reports whether h carries the configured key in either header.
// The comparison is constant-time so the fake cannot teach a timing attack.
func (s *Server) authorized(h http.Header) bool {
	if s.opts.APIKey == "" {
		return true
	}
	want := []byte(s.opts.APIKey)
	if k := h.Get("x-api-key"); k != "" && subtle.ConstantTimeCompare([]byte(k), want) == 1 {
		return true
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(a[7:])), want) == 1 {
		return true
	}
	return false
}

// authErr is the 401 for a missing or wrong key; it never echoes the key.
func authErr(h http.Header) *wireError {
	if h.Get("x-api-key") == "" && h.Get("Authorization") == "" {
		return &wireError{status: http.StatusUnauthorized, kind: errAuth, msg: "x-api-key header is required",
			oaiMsg: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
	}
	return &wireError{status: http.StatusUnauthorized, kind: errAuth, msg: "invalid x-api-key",
		oaiMsg: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.", oaiCode: "invalid_api_key"}
}

// redact copies h with credential values replaced, keeping the scheme of an
// Authorization header so tests can see which style a client used. Besides
// the providers' key headers (x-api-key, api-key, x-goog-api-key) it
// redacts cookies and any header named like a credential (…-key, …-token:
// x-amz-security-token, anthropic-…-key), since the log goes to files and
// over HTTP.
func redact(h http.Header) http.Header {
	out := h.Clone()
	for k, vs := range out {
		name := strings.ToLower(k)
		switch {
		case name == "authorization" || name == "proxy-authorization":
			for i, v := range vs {
				scheme, _, _ := strings.Cut(v, " ")
				vs[i] = scheme + " REDACTED"
			}
		case name == "api-key" || name == "cookie" || strings.HasSuffix(name, "-key") || strings.HasSuffix(name, "-token"):
			for i := range vs {
				vs[i] = "REDACTED"
			}
		}
	}
	return out
}

// exchange is one request being answered: it carries the log entry and
// records it when the status is decided.
type exchange struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	entry  LoggedRequest
	logged *logSlot // the log's copy, once logged
	final  bool     // the status is decided
	reqID  string
}

// requestID returns the request's id in the wire's style, made once.
func (ex *exchange) requestID() string {
	if ex.reqID == "" {
		if ex.entry.Provider == OpenAI {
			ex.reqID = ex.s.newID("req_", 32)
		} else {
			ex.reqID = ex.s.newID("req_011C", 20)
		}
	}
	return ex.reqID
}

// record stores the log entry with its final status. Called once per
// request, before the response body is written, so a test polling Requests
// sees a request whose stream is still in flight.
func (ex *exchange) record(status int) {
	if ex.final {
		return
	}
	ex.final = true
	ex.entry.Status = status
	ex.log()
}

// log puts the entry into the log, or updates the copy already there.
func (ex *exchange) log() {
	ex.s.mu.Lock()
	defer ex.s.mu.Unlock()
	ex.logged = ex.s.putLogLocked(ex.logged, &ex.entry)
}

// number assigns the request its number; only requests that reach the
// Responder (or a fault in its place) are numbered.
func (ex *exchange) number() int {
	ex.s.mu.Lock()
	ex.s.n++
	n := ex.s.n
	ex.s.mu.Unlock()
	ex.entry.N = n
	return n
}

// fail answers err in the wire's error shape.
func (ex *exchange) fail(err *wireError) {
	h := ex.w.Header()
	h.Set("Content-Type", "application/json")
	id := ex.requestID()
	if ex.entry.Provider == OpenAI {
		h.Set("x-request-id", id)
	} else {
		h.Set("request-id", id)
	}
	if err.retryAfter != nil {
		d := *err.retryAfter
		h.Set("retry-after", fmt.Sprint(int64((d+time.Second-1)/time.Second)))
		h.Set("retry-after-ms", fmt.Sprint(d.Milliseconds()))
	}
	status := err.statusOn(ex.entry.Provider)
	ex.record(status)
	ex.w.WriteHeader(status)
	_, _ = ex.w.Write(err.body(ex.entry.Provider, id))
}

// startHeaders writes the headers of a successful response.
func (ex *exchange) startHeaders(stream bool) {
	h := ex.w.Header()
	if stream {
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/json")
	}
	if ex.entry.Provider == OpenAI {
		h.Set("x-request-id", ex.requestID())
		h.Set("openai-version", "2020-10-01")
	} else {
		h.Set("request-id", ex.requestID())
	}
	ex.record(http.StatusOK)
	ex.w.WriteHeader(http.StatusOK)
}

// base62 is the alphabet of the providers' opaque IDs.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random base62 characters, as the real
// APIs' IDs look (msg_01…, toolu_01…, req_011C…, chatcmpl-…, call_…).
func (s *Server) newID(prefix string, n int) string {
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	s.mu.Lock()
	for range n {
		b = append(b, base62[s.idRNG.IntN(len(base62))])
	}
	s.mu.Unlock()
	return string(b)
}

// jsonBuf encodes v as compact JSON without HTML escaping, as both APIs
// write it (an SDK comparing bytes would otherwise see \u003c for <).
func jsonBuf(dst *bytes.Buffer, v any) error {
	return newFrameEncoder(dst).encode(v)
}

// frameEncoder encodes values into one reused buffer, for streams that
// encode a frame per delta.
type frameEncoder struct {
	buf *bytes.Buffer
	enc *json.Encoder
}

func newFrameEncoder(buf *bytes.Buffer) *frameEncoder {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return &frameEncoder{buf: buf, enc: enc}
}

// encode appends v's JSON to the buffer, without Encode's newline.
func (f *frameEncoder) encode(v any) error {
	if err := f.enc.Encode(v); err != nil {
		return err
	}
	f.buf.Truncate(f.buf.Len() - 1)
	return nil
}

// mustJSON encodes a value whose type cannot fail to encode (structs of
// strings, numbers and validated raw JSON).
func mustJSON(v any) []byte {
	var b bytes.Buffer
	if err := jsonBuf(&b, v); err != nil {
		panic(fmt.Sprintf("fake: encode %T: %v", v, err))
	}
	return b.Bytes()
}
