package fstool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// WriteFile is the write_file tool.
type WriteFile struct {
	ws  *Workspace
	lim Limits
}

// NewWriteFile returns write_file confined to ws.
func NewWriteFile(ws *Workspace, lim Limits) *WriteFile {
	return &WriteFile{ws: ws, lim: lim.withDefaults()}
}

// Spec implements tool.Tool.
func (t *WriteFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "write_file",
		Description: "Create a file in the workspace, or replace its whole content. Missing parent " +
			"directories are created. The file is written atomically: readers see the old or the new " +
			"content, never half. To change part of an existing file, prefer edit_file.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to write, relative to the workspace root."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (t *WriteFile) ReadOnly() bool { return false }

// Run implements tool.Tool.
func (t *WriteFile) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}](input)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
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
	if err := t.ws.hider(r).check(r, rel, in.Path); err != nil {
		return "", err
	}
	if err := t.ws.writable(rel, in.Path); err != nil {
		return "", err
	}
	perm := fs.FileMode(0o644)
	verb := "created"
	switch fi, err := r.Stat(rel); {
	case err == nil && fi.IsDir():
		return "", fmt.Errorf("%s is a directory", in.Path)
	case err == nil && !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s)", in.Path, fi.Mode().Type())
	case err == nil:
		perm, verb = fi.Mode().Perm(), "overwrote"
	case !errors.Is(err, fs.ErrNotExist):
		return "", t.ws.pathErr(in.Path, err)
	}
	if err := writeAtomic(r, rel, []byte(in.Content), perm); err != nil {
		return "", t.ws.pathErr(in.Path, err)
	}
	return fmt.Sprintf("%s %s: wrote %d bytes", verb, in.Path, len(in.Content)), nil
}

// writeAtomic replaces rel under r with data: it writes a temporary file in
// the same directory (so the rename cannot cross file systems), syncs it,
// and renames it over the target. A crash leaves either the old file or the
// new one, plus at worst a stray temporary file.
func writeAtomic(r *os.Root, rel string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(rel)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(rel)+".deputy-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = r.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		// Chmod because OpenFile's mode passes through the umask, and an
		// overwritten file keeps its exact permissions.
		if err = f.Chmod(perm); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return r.Rename(tmp, rel)
}
