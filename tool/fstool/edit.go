package fstool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// EditFile is the edit_file tool.
type EditFile struct{ confined }

// NewEditFile returns edit_file confined to ws.
func NewEditFile(ws *Workspace, lim Limits) *EditFile {
	return &EditFile{confine(ws, lim)}
}

// Spec implements tool.Tool.
func (t *EditFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "edit_file",
		Description: "Replace one exact piece of text in an existing file of the workspace. `old` must " +
			"appear in the file exactly once, character for character (whitespace, indentation and line " +
			"endings included); copy it from read_file output without the line-number prefix. If it appears " +
			"several times, include more surrounding lines to make it unique. The file is rewritten atomically.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to edit, relative to the workspace root."},
    "old": {"type": "string", "minLength": 1, "description": "The exact text to replace; must occur exactly once in the file."},
    "new": {"type": "string", "description": "The text to put in its place (may be empty to delete)."}
  },
  "required": ["path", "old", "new"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (t *EditFile) ReadOnly() bool { return false }

// Run implements tool.Tool.
func (t *EditFile) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Path string `json:"path"`
		Old  string `json:"old"`
		New  string `json:"new"`
	}](input)
	if err != nil {
		return "", err
	}
	if in.Old == in.New {
		return "", fmt.Errorf("old and new are identical; nothing to change in %s", in.Path)
	}
	r, rel, hide, err := t.ws.openWritable(ctx, in.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		return "", t.ws.pathErr(in.Path, err)
	}
	switch {
	case fi.IsDir():
		return "", fmt.Errorf("%s is a directory", in.Path)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s)", in.Path, fi.Mode().Type())
	case fi.Size() > t.lim.MaxFileBytes:
		return "", fmt.Errorf("%s is %d bytes, more than edit_file handles (%d); use write_file or bash", in.Path, fi.Size(), t.lim.MaxFileBytes)
	}
	data, err := readChecked(r, rel, t.ws, hide, in.Path)
	if err != nil {
		return "", err
	}
	if isBinary(data) {
		return "", fmt.Errorf("%s is a binary file; edit_file changes text only", in.Path)
	}
	text := string(data)
	switch n := strings.Count(text, in.Old); {
	case n == 0:
		hint := "it must match exactly, including whitespace and indentation; read the file again and copy the text"
		if strings.Contains(text, "\r\n") && strings.Contains(in.Old, "\n") && !strings.Contains(in.Old, "\r\n") {
			hint = "the file has CRLF (\\r\\n) line endings but old has bare \\n"
		}
		return "", fmt.Errorf("old text not found in %s (%s)", in.Path, hint)
	case n > 1:
		return "", fmt.Errorf("old text occurs %d times in %s; it must occur exactly once: include more surrounding context in old to pick one", n, in.Path)
	}
	at := strings.Index(text, in.Old)
	line := 1 + strings.Count(text[:at], "\n")
	updated := text[:at] + in.New + text[at+len(in.Old):]
	if err := t.ws.writeAtomic(r, hide, rel, in.Path, []byte(updated), fi.Mode().Perm()); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s at line %d: replaced %d lines with %d (file is now %d bytes)",
		in.Path, line, lineCount(in.Old), lineCount(in.New), len(updated)), nil
}

// lineCount counts the lines a snippet spans, a final partial line included.
func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}
