package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// `deputy serve` drains as `deputy worker` does, and says so when the
// drain is cut: a second signal while a bash call runs cuts it off, and
// serve prints the line run and worker print.
func TestServeReportsACutDrain(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": drainScenario})
	if _, errOut, code := deputy(t, ws, nil, "run", "--detach", "--model", "fake", "--scenario", "s.yaml", "drain me"); code != 0 {
		t.Fatalf("run --detach: exit %d: %s", code, errOut)
	}
	p := startProc(t, ws, "serve", "--addr", "127.0.0.1:0", "--token-file", filepath.Join(ws, "token"), "--model", "fake",
		"--scenario", "s.yaml", "--drain-timeout", "10m")
	p.waitFor(t, "bash call starting", func() bool { return exists(filepath.Join(ws, "started.txt")) })
	p.signal(t, syscall.SIGTERM)
	p.waitFor(t, "stopping line", func() bool { return strings.Contains(p.stderr.String(), "deputy serve: stopping") })
	p.signal(t, syscall.SIGINT)
	p.wait(t)
	if errOut := p.stderr.String(); !strings.Contains(errOut, "were cut off") {
		t.Errorf("serve does not report the cut drain:\nstderr:\n%s", errOut)
	}
}
