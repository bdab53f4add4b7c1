package fake

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// sseEvent is one server-sent event: an optional event name and its data.
type sseEvent struct {
	Name string
	Data string
}

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

// parseSSE reads a whole event stream as the HTML standard's event-stream
// interpretation does: lines end in \n, \r\n or \r; a line starting with ':'
// is a comment; "field: value" loses one space after the colon; data lines
// are joined with \n; a blank line dispatches the event (an event whose data
// buffer was never written is dropped). Fields other than event and data are
// ignored. A trailing event without its blank line is dropped, as browsers do.
func parseSSE(r io.Reader) ([]sseEvent, error) {
	var (
		out     []sseEvent
		name    string
		data    strings.Builder
		hasData bool
	)
	br := bufio.NewReader(r)
	for {
		line, err := readSSELine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("read event stream: %w", err)
		}
		if line == "" {
			if hasData {
				out = append(out, sseEvent{Name: name, Data: strings.TrimSuffix(data.String(), "\n")})
			}
			name, hasData = "", false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		}
	}
}

// readSSELine returns the next line without its terminator (\n, \r\n or a
// lone \r). io.EOF is returned only when no bytes of an unterminated line
// remain; an unterminated last line is dropped, as it can never dispatch.
func readSSELine(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return sb.String(), nil
		case '\r':
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return sb.String(), nil
		}
		sb.WriteByte(c)
	}
}
