package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// maxAnswerLogged bounds the answer body kept per exchange (LoggedRequest.
// Answer): a long stream is logged up to here and marked cut, so one
// exchange cannot fill the log. The log as a whole is bounded by
// Options.MaxLogBytes (requestlog_ring.go), as 10,000 entries of this size
// alone would be 10 GiB.
const maxAnswerLogged = 1 << 20

// answerRecorder is the ResponseWriter every exchange writes through: it
// passes everything on and keeps the status and the first maxAnswerLogged
// bytes of the body. It flushes (the SSE writer needs it) and unwraps, so
// http.ResponseController reaches the connection's own writer.
type answerRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	cut    bool
}

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if room := maxAnswerLogged - a.body.Len(); room < len(b) {
		a.body.Write(b[:max(room, 0)])
		a.cut = true
	} else {
		a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

func (a *answerRecorder) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// ended completes ex's log entry once its handler has returned: the answer
// as sent, the latency and the exchange's number in the order exchanges
// end; then the entry goes to Options.Log. ex is nil for a request that
// never became an exchange.
func (s *Server) ended(ex *exchange, a *answerRecorder, arrived time.Time) {
	if ex == nil {
		return
	}
	e := &ex.entry
	if !ex.final || e.Status == 0 {
		e.Status = a.status
	}
	ex.final = true
	e.Latency = s.clock.Now().Sub(arrived)
	e.Answer, e.AnswerCut = a.body.Bytes(), a.cut
	e.AnswerType = a.Header().Get("Content-Type")
	// logMu before mu: the sequence numbers and the file's lines then come
	// in the same order.
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.mu.Lock()
	s.seq++
	e.Seq = s.seq
	s.mu.Unlock()
	ex.log()
	if s.opts.Log != nil && s.logErr == nil {
		s.logErr = s.writeLogLine(e)
	}
}

// writeLogLine writes one entry as a JSON line to Options.Log, in one Write.
func (s *Server) writeLogLine(e *LoggedRequest) error {
	line, err := json.Marshal(e.Entry())
	if err != nil {
		return fmt.Errorf("fake: log request %d: %w", e.Seq, err)
	}
	if _, err := s.opts.Log.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("fake: log request %d: %w", e.Seq, err)
	}
	if f, ok := s.opts.Log.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("fake: log request %d: flush: %w", e.Seq, err)
		}
	}
	return nil
}

// LogErr returns the first error writing Options.Log, after which the
// server writes no more lines (the in-memory log goes on).
func (s *Server) LogErr() error {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.logErr
}
