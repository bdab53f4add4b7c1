package fake

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
)

// sseWriter writes text/event-stream frames and flushes after each one, so a
// client sees every event when the server sends it rather than when a buffer
// fills. It reuses one buffer across frames: a stream is written by a single
// goroutine.
type sseWriter struct {
	w   io.Writer
	f   http.Flusher // nil when w cannot flush
	buf []byte
}

func newSSEWriter(w io.Writer) *sseWriter {
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f}
}

// errBadEventName is returned for an event name that cannot be written as one
// SSE line.
var errBadEventName = errors.New("sse: event name contains a line break")

// frame renders one event. A data value holding line breaks (\n, \r\n or \r)
// becomes several data lines, which a parser joins back with \n. At least one
// data line is always written, so an event with empty data is still
// dispatched by a conforming parser.
func (s *sseWriter) frame(name string, data []byte) ([]byte, error) {
	b := s.buf[:0]
	if name != "" {
		if strings.ContainsAny(name, "\r\n") {
			return nil, errBadEventName
		}
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, '\n')
	s.buf = b
	return b, nil
}

// event writes one event and flushes it.
func (s *sseWriter) event(name string, data []byte) error {
	b, err := s.frame(name, data)
	if err != nil {
		return err
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}
