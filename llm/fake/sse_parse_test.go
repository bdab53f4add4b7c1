package fake

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// sseEvent is one parsed server-sent event: an optional event name and its
// data.
type sseEvent struct {
	Name string
	Data string
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
