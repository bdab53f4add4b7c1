package fstool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/fstool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSet(t *testing.T, ws string) *tool.Set {
	t.Helper()
	return newSetLimits(t, ws, fstool.Limits{})
}

func newSetLimits(t *testing.T, dir string, lim fstool.Limits) *tool.Set {
	t.Helper()
	ws, err := fstool.NewWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(fstool.Tools(ws, lim)...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// callTool goes through Set.Call so every test also exercises the schema.
func callTool(t *testing.T, set *tool.Set, name string, args map[string]any) (string, bool) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return set.Call(context.Background(), name, raw)
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
