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
type WriteFile struct{ confined }

// NewWriteFile returns write_file confined to ws.
func NewWriteFile(ws *Workspace, lim Limits) *WriteFile {
	return &WriteFile{confine(ws, lim)}
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
	r, rel, hide, err := t.ws.openWritable(ctx, in.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
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
	if err := t.ws.writeAtomic(r, hide, rel, in.Path, []byte(in.Content), perm); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: wrote %d bytes", verb, in.Path, len(in.Content)), nil
}

// beforeWrite, when set (tests only), runs between a write's checks of
// its path and its opening of the directory: the window in which a
// concurrent program (a sandboxed sibling child on the same workspace) can
// swap a directory on the path for a symlink.
var beforeWrite func(rel string)

// writeAtomic replaces rel under r with data: it writes a temporary file in
// the same directory (so the rename cannot cross file systems), syncs it,
// and renames it over the target. A crash leaves either the old file or the
// new one, plus at worst a stray temporary file.
//
// The checks of rel (hidden, read-only) were by its path, before this
// runs, and os.Root follows a symlink that stays in the workspace: a
// directory swapped for a link to .claude or to the root meanwhile would
// lead the write into a path this tool refuses. So the directory is opened
// once and held, the path the kernel opened is checked again (heldDir),
// and the temporary file and the rename go through that handle, one name
// each, with nothing left to resolve.
func (w *Workspace) writeAtomic(r *os.Root, hide *hider, rel, asked string, data []byte, perm fs.FileMode) (err error) {
	if beforeWrite != nil {
		beforeWrite(rel)
	}
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return w.pathErr(asked, err)
		}
	}
	d, err := r.OpenRoot(dir)
	if err != nil {
		return w.pathErr(asked, err)
	}
	defer d.Close()
	if err := w.heldDir(d, hide, base, asked); err != nil {
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + base + ".deputy-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return w.pathErr(asked, err)
	}
	defer func() {
		if err != nil {
			_ = d.Remove(tmp)
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
		return w.pathErr(asked, err)
	}
	if err := d.Rename(tmp, base); err != nil {
		return w.pathErr(asked, err)
	}
	return nil
}

// heldDir refuses a write into the directory d holds when that directory,
// as the kernel opened it (/proc/self/fd), is not where the checks saw it:
// outside the workspace, or base in it read-only or hidden. Without /proc
// (not Linux) only a hidden directory's identity is checked.
func (w *Workspace) heldDir(d *os.Root, hide *hider, base, asked string) error {
	f, err := d.Open(".")
	if err != nil {
		return w.pathErr(asked, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		if as := hide.same(fi); as != "" {
			return &HiddenError{Path: asked, Hidden: as}
		}
	}
	at, ok := openedPath(f)
	if !ok {
		return nil
	}
	rel, err := filepath.Rel(w.real, at)
	if err != nil || escapes(rel) {
		return &OutsideError{Path: asked, Workspace: w.dir}
	}
	rel = filepath.Join(rel, base)
	if as := hide.covers(rel); as != "" {
		return &HiddenError{Path: asked, Hidden: as}
	}
	if err := w.writable(rel, asked); err != nil {
		return fmt.Errorf("%w: %s resolves to %s now (a directory on its path changed during the call); nothing was written",
			err, asked, display(rel))
	}
	return nil
}
