package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Snapshot mechanics without a sandbox: the child's side is played by the
// test writing into the copy.

func TestSandboxSnapshotTypeChangesAndModes(t *testing.T) {
	t.Parallel()
	ws := snapshotWorkspace(t)
	if err := os.Chmod(filepath.Join(ws, "keep.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := takeSnapshot(ws, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	if fi, err := os.Stat(filepath.Join(s.copy, "keep.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode not copied: %v %v", fi.Mode(), err)
	}
	c := s.copy
	// dir/ becomes a file, a.txt a directory, keep.txt only changes mode.
	if err := os.RemoveAll(filepath.Join(c, "dir")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(c, "dir"), "now a file\n")
	if err := os.Remove(filepath.Join(c, "a.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(c, "a.txt", "inner"), "inside\n")
	if err := os.Chmod(filepath.Join(c, "keep.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := s.commit()
	if err != nil {
		t.Fatal(err)
	}
	want := &Changes{
		Added:    []string{"a.txt/inner"},
		Modified: []string{"a.txt", "dir", "keep.txt"},
		Deleted:  []string{"dir/b.txt"},
	}
	if !reflect.DeepEqual(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if treeDigest(t, ws) != treeDigest(t, s.copy) {
		t.Error("the workspace differs from the snapshot after the commit")
	}
	// Nothing changed since: an empty commit.
	if ch, err := s.commit(); err != nil || len(ch.Added)+len(ch.Modified)+len(ch.Deleted) != 0 {
		t.Errorf("second commit: %+v %v", ch, err)
	}
}

// A directory the child removed that gained a file in the workspace
// meanwhile is a conflict, not a half-applied removal.
func TestSandboxSnapshotConflictOnRemovedDir(t *testing.T) {
	t.Parallel()
	ws := snapshotWorkspace(t)
	s, err := takeSnapshot(ws, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	if err := os.RemoveAll(filepath.Join(s.copy, "dir")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "dir", "parents-new.txt"), "keep me\n")
	before := treeDigest(t, ws)
	_, err = s.commit()
	var ce *ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Paths, []string{"dir"}) {
		t.Fatalf("got %v", err)
	}
	if treeDigest(t, ws) != before {
		t.Error("a refused commit changed the workspace")
	}
}

// A symlink the child planted is committed as a symlink, never followed:
// writes cannot leave the workspace through it.
func TestSandboxSnapshotSymlinkNotFollowed(t *testing.T) {
	t.Parallel()
	ws := snapshotWorkspace(t)
	outside := t.TempDir()
	s, err := takeSnapshot(ws, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	if err := os.Symlink(outside, filepath.Join(s.copy, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(ws, "out")); got != outside {
		t.Fatalf("link not committed: %q", got)
	}
	// The workspace's link now points out; a later file "out/x" in the
	// copy cannot exist (the copy's out is a link too), and the workspace
	// side is written through os.Root, which refuses to follow it.
	ro, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	cp, err := os.OpenRoot(s.copy)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	writeFile(t, filepath.Join(s.copy, "x"), "x")
	if err := apply(ro, cp, "out/x", entry{mode: 0o644}); err == nil {
		t.Error("apply wrote through a symlink leading out of the workspace")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside: %v", entries)
	}
}

// Dropping a snapshot in which the child left read-only directories works
// (a non-root deputy could not empty them as they are).
func TestSandboxSnapshotDropReadOnly(t *testing.T) {
	t.Parallel()
	ws := snapshotWorkspace(t)
	s, err := takeSnapshot(ws, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(s.copy, "dir"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := s.drop(); err != nil {
		t.Fatal(err)
	}
	if exists(s.tmp) {
		t.Error("snapshot left behind")
	}
}

// Sweep removes the state of dead deputy processes and nothing else.
func TestSandboxSweep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A pid above pid_max's default range: no such process.
	dead := filepath.Join(dir, "deputy-snapshot-4194304-123")
	mine := filepath.Join(dir, statePrefix("tmp")+"456")
	other := filepath.Join(dir, "deputy-snapshot-notapid-1")
	unrelated := filepath.Join(dir, "somebody-else")
	for _, d := range []string{dead, mine, other, unrelated} {
		writeFile(t, filepath.Join(d, "sub", "f"), "x")
	}
	if err := os.Chmod(filepath.Join(dead, "sub"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := Sweep(dir); err != nil {
		t.Fatal(err)
	}
	if exists(dead) {
		t.Error("a dead process's snapshot was kept")
	}
	for _, d := range []string{mine, other, unrelated} {
		if !exists(d) {
			t.Errorf("%s was removed", d)
		}
	}
}
