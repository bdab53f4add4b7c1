package fstool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/deputy-run/deputy/tool"
)

// lineReader yields the lines of a stream one by one, of any length, while
// keeping at most max bytes of each: a minified file with one 5 MB line
// must neither fail (as bufio.Scanner would) nor fill the model's context.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// newLineReader reads lines from br, which the caller has already peeked
// into to sniff for binary content.
func newLineReader(br *bufio.Reader, max int) *lineReader {
	return &lineReader{br: br, max: max}
}

// next returns the next line without its line ending, and how many bytes
// of it were cut. It returns io.EOF after the last line; a final line
// without a newline still counts as a line.
func (lr *lineReader) next() (line []byte, cut int, err error) {
	lr.buf = lr.buf[:0]
	n, read := 0, false
	newline := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		read = read || len(chunk) > 0
		n += len(chunk)
		if room := lr.max + 1 - len(lr.buf); room > 0 { // +1 keeps a '\r' before the cut in view
			lr.buf = append(lr.buf, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if !read {
				return nil, 0, io.EOF
			}
			break
		}
		if err != nil {
			return nil, 0, err
		}
		newline = true
		break
	}
	size := n // bytes of the line content, line ending excluded
	if newline {
		size--
		if len(lr.buf) > size {
			lr.buf = lr.buf[:size]
		}
	}
	if size > 0 && size <= len(lr.buf) && lr.buf[size-1] == '\r' {
		size--
		lr.buf = lr.buf[:size]
	}
	if size <= lr.max {
		return lr.buf[:size], 0, nil
	}
	keep := tool.CutUTF8(lr.buf, lr.max)
	return keep, size - len(keep), nil
}

// showLine renders a line for the model: valid UTF-8, with a note when it
// was cut.
func showLine(line []byte, cut int) string {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	if cut > 0 {
		s += fmt.Sprintf(" [... %d more bytes on this line]", cut)
	}
	return s
}
