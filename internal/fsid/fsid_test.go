package fsid

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fa, _ := os.Lstat(a)
	fb, _ := os.Lstat(b)
	if _, c := InoCtime(fa); c == 0 {
		t.Error("no change time")
	}
	if runtime.GOOS != "linux" {
		return
	}
	da, ia := DevIno(fa)
	db, ib := DevIno(fb)
	if da != db || ia == ib || ia == 0 {
		t.Errorf("a %d:%d, b %d:%d", da, ia, db, ib)
	}
	if i, _ := InoCtime(fa); i != ia {
		t.Errorf("InoCtime's inode %d, DevIno's %d", i, ia)
	}
}
