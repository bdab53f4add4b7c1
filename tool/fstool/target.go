package fstool

import (
	"context"
	"os"
)

// confined is what every file tool holds: the workspace it is confined to
// and its limits, the defaults filled in.
type confined struct {
	ws  *Workspace
	lim Limits
}

func confine(ws *Workspace, lim Limits) confined {
	return confined{ws: ws, lim: lim.withDefaults()}
}

// openPath is how a file tool call starts: it opens the workspace for the
// call and resolves p, the path the model gave, inside it, refusing a
// hidden path. hide is the call's view of the hidden paths, for the files
// it goes on to open. The caller closes r; on error it is closed already.
func (w *Workspace) openPath(p string) (r *os.Root, rel string, hide *hider, err error) {
	r, err = w.open()
	if err != nil {
		return nil, "", nil, err
	}
	rel, err = w.resolve(r, p)
	if err == nil {
		hide = w.hider(r)
		err = hide.check(r, rel, p)
	}
	if err != nil {
		r.Close()
		return nil, "", nil, err
	}
	return r, rel, hide, nil
}

// openWritable is openPath for a tool that writes p (write_file,
// edit_file): a read-only path is refused too, before anything is read,
// and nothing is opened once ctx has ended (a write is not begun for a
// call that was cancelled).
func (w *Workspace) openWritable(ctx context.Context, p string) (r *os.Root, rel string, hide *hider, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", nil, err
	}
	r, rel, hide, err = w.openPath(p)
	if err != nil {
		return nil, "", nil, err
	}
	if err := w.writable(rel, p); err != nil {
		r.Close()
		return nil, "", nil, err
	}
	return r, rel, hide, nil
}
