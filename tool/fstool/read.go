package fstool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// ReadFile is the read_file tool.
type ReadFile struct{ confined }

// NewReadFile returns read_file confined to ws.
func NewReadFile(ws *Workspace, lim Limits) *ReadFile {
	return &ReadFile{confine(ws, lim)}
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
	r, rel, hide, err := t.ws.openPath(in.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	f, br, fi, err := t.openText(r, rel, hide, in.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// Counting the lines of a huge file would read all of it; past this
	// size the note says only that more lines remain.
	countAll := fi.Size() <= t.lim.MaxFileBytes
	l, err := t.list(ctx, br, first, limit, countAll, in.Path)
	if err != nil {
		return "", err
	}
	return l.result(in.Path, first, countAll, fi.Size())
}

// openText opens the regular text file rel for reading, refusing, with a
// message that says what to do instead, a directory, anything else that
// is not a regular file, a hidden file and a binary one. The caller
// closes f.
func (t *ReadFile) openText(r *os.Root, rel string, hide *hider, asked string) (f *os.File, br *bufio.Reader, fi fs.FileInfo, err error) {
	// Stat before opening: opening a FIFO for reading would block.
	fi, err = r.Stat(rel)
	if err != nil {
		return nil, nil, nil, t.ws.pathErr(asked, err)
	}
	if fi.IsDir() {
		return nil, nil, nil, fmt.Errorf("%s is a directory; use glob to list its files", asked)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, nil, fmt.Errorf("%s is not a regular file (%s)", asked, fi.Mode().Type())
	}
	f, err = r.Open(rel)
	if err != nil {
		return nil, nil, nil, t.ws.pathErr(asked, err)
	}
	if err := hide.opened(t.ws, f, asked); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	br = bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if isBinary(head) {
		f.Close()
		return nil, nil, nil, fmt.Errorf("%s is a binary file (%d bytes); read_file shows text only", asked, fi.Size())
	}
	return f, br, fi, nil
}

// readListing is what read_file listed of a file: the numbered lines
// shown, and the counts the note after them needs.
type readListing struct {
	out  strings.Builder
	n    int  // lines seen
	last int  // the last line shown
	full bool // the output limit stopped the listing
}

// list numbers the lines first to first+limit-1 (fewer when the output
// limit is reached), and goes on counting the rest when countAll: the
// note then says how many remain. path is the file as the model named
// it, for a read error.
func (t *ReadFile) list(ctx context.Context, br *bufio.Reader, first, limit int, countAll bool, path string) (*readListing, error) {
	l := &readListing{}
	lr := newLineReader(br, t.lim.LineChars)
	shown := 0
	for {
		if l.n%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return nil, t.ws.pathErr(path, err)
		}
		l.n++
		if l.n < first || shown >= limit || l.full {
			if l.n > l.last && l.last > 0 && !countAll {
				return l, nil // a huge file: knowing that more remains is enough
			}
			continue // keep counting: the note tells the total
		}
		row := fmt.Sprintf("%6d\t%s\n", l.n, showLine(line, cut))
		if l.out.Len()+len(row) > t.lim.OutputChars && shown > 0 {
			l.full = true
			continue
		}
		l.out.WriteString(row)
		shown++
		l.last = l.n
	}
}

// result is the listing with what the model needs to go on: that the
// file (path, of size bytes) is empty, that the offset is past its end,
// or which lines remain and the offset that continues.
func (l *readListing) result(path string, first int, countAll bool, size int64) (string, error) {
	switch {
	case l.n == 0:
		return fmt.Sprintf("(%s is empty)", path), nil
	case first > l.n:
		return "", fmt.Errorf("offset %d is past the end of %s, which has %d lines", first, path, l.n)
	}
	if l.last < l.n {
		why := ""
		if l.full {
			why = " (output size limit)"
		}
		if countAll {
			fmt.Fprintf(&l.out, "[showing lines %d-%d of %d%s; %d more lines remain: continue with offset=%d]\n",
				first, l.last, l.n, why, l.n-l.last, l.last+1)
		} else {
			fmt.Fprintf(&l.out, "[showing lines %d-%d%s of a %d-byte file; more lines remain: continue with offset=%d]\n",
				first, l.last, why, size, l.last+1)
		}
	}
	return l.out.String(), nil
}
