package fstool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// ReadFile is the read_file tool.
type ReadFile struct {
	ws  *Workspace
	lim Limits
}

// NewReadFile returns read_file confined to ws.
func NewReadFile(ws *Workspace, lim Limits) *ReadFile {
	return &ReadFile{ws: ws, lim: lim.withDefaults()}
}

// Spec implements tool.Tool.
func (t *ReadFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file in the workspace. Lines are numbered like `cat -n` "+
			"(the number, a tab, the line); the numbers are not part of the file. Returns up to %d lines; "+
			"use offset and limit to read a long file in parts: the result says when more lines remain and "+
			"which offset continues. Very long lines are cut. Binary files are refused. Paths are relative "+
			"to the workspace root (absolute paths inside it also work).", t.lim.ReadLines),
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to read, relative to the workspace root."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return. Default and maximum ` + fmt.Sprint(t.lim.ReadLines) + `."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (t *ReadFile) ReadOnly() bool { return true }

// Run implements tool.Tool.
func (t *ReadFile) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}](input)
	if err != nil {
		return "", err
	}
	first := max(in.Offset, 1)
	limit := in.Limit
	if limit <= 0 || limit > t.lim.ReadLines {
		limit = t.lim.ReadLines
	}
	r, err := t.ws.open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	rel, err := t.ws.resolve(r, in.Path)
	if err != nil {
		return "", err
	}
	hide := t.ws.hider(r)
	if err := hide.check(r, rel, in.Path); err != nil {
		return "", err
	}
	// Stat before opening: opening a FIFO for reading would block.
	fi, err := r.Stat(rel)
	if err != nil {
		return "", t.ws.pathErr(in.Path, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%s is a directory; use glob to list its files", in.Path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", in.Path, fi.Mode().Type())
	}
	f, err := r.Open(rel)
	if err != nil {
		return "", t.ws.pathErr(in.Path, err)
	}
	defer f.Close()
	if err := hide.opened(t.ws, f, in.Path); err != nil {
		return "", err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if isBinary(head) {
		return "", fmt.Errorf("%s is a binary file (%d bytes); read_file shows text only", in.Path, fi.Size())
	}

	// Counting the lines of a huge file would read all of it; past this
	// size the note says only that more lines remain.
	countAll := fi.Size() <= t.lim.MaxFileBytes
	lr := newLineReader(br, t.lim.LineChars)
	var out strings.Builder
	n, shown, last := 0, 0, 0 // lines seen, lines shown, last line shown
	full := false             // the output limit stopped the listing
	for {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		line, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", t.ws.pathErr(in.Path, err)
		}
		n++
		if n < first || shown >= limit || full {
			if n > last && last > 0 && !countAll {
				break // a huge file: knowing that more remains is enough
			}
			continue // keep counting: the note tells the total
		}
		row := fmt.Sprintf("%6d\t%s\n", n, showLine(line, cut))
		if out.Len()+len(row) > t.lim.OutputChars && shown > 0 {
			full = true
			continue
		}
		out.WriteString(row)
		shown++
		last = n
	}
	switch {
	case n == 0:
		return fmt.Sprintf("(%s is empty)", in.Path), nil
	case first > n:
		return "", fmt.Errorf("offset %d is past the end of %s, which has %d lines", first, in.Path, n)
	}
	if last < n {
		why := ""
		if full {
			why = " (output size limit)"
		}
		if countAll {
			fmt.Fprintf(&out, "[showing lines %d-%d of %d%s; %d more lines remain: continue with offset=%d]\n",
				first, last, n, why, n-last, last+1)
		} else {
			fmt.Fprintf(&out, "[showing lines %d-%d%s of a %d-byte file; more lines remain: continue with offset=%d]\n",
				first, last, why, fi.Size(), last+1)
		}
	}
	return out.String(), nil
}
