package fake

import (
	"errors"
	"net/http"
	"time"
)

// pickFault returns the server-level fault for request n: Options.Faults
// first, then a draw against Options.FaultRate. The draw happens for every
// request, so which requests fail depends only on the seed and the request
// numbers, not on which of them had explicit faults.
func (s *Server) pickFault(n int) *Fault {
	var random bool
	if s.opts.FaultRate > 0 {
		s.mu.Lock()
		random = s.faultRNG.Float64() < s.opts.FaultRate
		s.mu.Unlock()
	}
	if f, ok := s.opts.Faults[n]; ok {
		return &f
	}
	if random {
		f := s.opts.RandomFault
		if f.Kind == "" {
			f.Kind = FaultServerError
		}
		return &f
	}
	return nil
}

// statusFault reports whether a fault replaces the whole response with an
// error status (the model never runs), and which one. A stream-only fault on
// a non-streaming request becomes the status error a client would see
// instead: an error event there is an overloaded answer.
func statusFault(f *Fault, stream bool) (*wireError, bool) {
	if f == nil {
		return nil, false
	}
	switch f.Kind {
	case FaultRateLimit:
		d := max(f.RetryAfter, 0)
		return &wireError{status: http.StatusTooManyRequests, kind: errRateLimit, retryAfter: &d,
			msg: "This request would exceed the rate limit for your organization. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."}, true
	case FaultOverloaded:
		return &wireError{status: 529, kind: errOverloaded, msg: "Overloaded"}, true
	case FaultServerError:
		return &wireError{status: http.StatusInternalServerError, kind: errAPI, msg: "Internal server error"}, true
	case FaultErrorEvent:
		if !stream {
			return &wireError{status: 529, kind: errOverloaded, msg: "Overloaded"}, true
		}
	}
	return nil, false
}

// errStreamEnded stops a stream that a fault has ended on purpose.
var errStreamEnded = errors.New("fake: stream ended by an injected fault")

// bodyWriter writes a response body, applying a body-level fault
// (cut_stream, error_event, malformed_json) at a frame boundary or byte
// offset.
type bodyWriter struct {
	w       http.ResponseWriter
	sse     *sseWriter
	fault   *Fault // nil, or a body-level fault
	written int
	// flushEach sends every frame as soon as it is written. Only a paced
	// stream needs it: without per-token latency the whole stream is ready
	// at once, and letting net/http batch frames into its 4 KiB buffer
	// makes the fake several times faster under load. A client must parse
	// frames split or joined at any byte either way.
	flushEach bool
	// errFrame and badFrame render the wire's error event and malformed
	// frame when those faults trip.
	errFrame func() (name string, data []byte)
	badFrame func() (name string, data []byte)
}

func newBodyWriter(w http.ResponseWriter, f *Fault) *bodyWriter {
	bw := &bodyWriter{w: w, sse: newSSEWriter(w)}
	if f != nil {
		switch f.Kind {
		case FaultCutStream, FaultErrorEvent, FaultMalformedJSON:
			bw.fault = f
		}
	}
	return bw
}

// event writes one SSE frame. last marks the stream's final frame: a fault
// that has not tripped by then trips there, so the fault always happens.
func (bw *bodyWriter) event(name string, data []byte, last bool) error {
	f := bw.fault
	if f != nil && f.Kind != FaultCutStream && (bw.written >= f.AfterBytes || last) {
		render := bw.errFrame
		if f.Kind == FaultMalformedJSON {
			render = bw.badFrame
		}
		n, d := render()
		if err := bw.sse.event(n, d); err != nil {
			return err
		}
		return errStreamEnded
	}
	frame, err := bw.sse.frame(name, data)
	if err != nil {
		return err
	}
	if f != nil && f.Kind == FaultCutStream {
		if cut := f.AfterBytes - bw.written; cut < len(frame) || last {
			bw.cut(frame, cut)
		}
	}
	if _, err := bw.w.Write(frame); err != nil {
		return err
	}
	bw.written += len(frame)
	if bw.flushEach && bw.sse.f != nil {
		bw.sse.f.Flush()
	}
	return nil
}

// whole writes a non-streamed body, applying cut_stream (the body stops
// after AfterBytes) or malformed_json (only the first half is sent).
func (bw *bodyWriter) whole(body []byte) error {
	if f := bw.fault; f != nil {
		switch f.Kind {
		case FaultCutStream:
			bw.cut(body, f.AfterBytes)
		case FaultMalformedJSON:
			body = body[:len(body)/2]
		}
	}
	_, err := bw.w.Write(body)
	return err
}

// cut sends the first n bytes of b (at least none, at most all but one),
// flushes them, and drops the connection: the client reads a truncated
// body and then an unexpected EOF. http.ErrAbortHandler makes net/http
// close the connection without logging a panic.
func (bw *bodyWriter) cut(b []byte, n int) {
	n = min(max(n, 0), len(b)-1)
	if n > 0 {
		_, _ = bw.w.Write(b[:n])
	}
	if fl, ok := bw.w.(http.Flusher); ok {
		fl.Flush()
	}
	panic(http.ErrAbortHandler)
}

// latency returns the first-byte and per-token delays for a request.
func (s *Server) latency(r *Reply, f *Fault) (first, perToken time.Duration) {
	first, perToken = s.opts.FirstByte, s.opts.PerToken
	if r.FirstByte > 0 {
		first = r.FirstByte
	}
	if r.PerToken > 0 {
		perToken = r.PerToken
	}
	if f != nil && f.Kind == FaultSlowFirstByte {
		first += f.Delay
	}
	return first, perToken
}
