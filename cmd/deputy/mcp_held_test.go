package main

import (
	"strings"
	"syscall"
	"testing"
)

// deputy mcp on a SQLite database deputy serve holds tells the user to
// connect to serve's /mcp instead, in one line, exit 2.
func TestMcpOnADatabaseServeHolds(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := startProc(t, ws, "serve", "--addr", "127.0.0.1:0", "--model", "fake")
	p.waitFor(t, "listening line", func() bool { return strings.Contains(p.stderr.String(), "listening on") })
	args := []string{"mcp", "--model", "fake"}
	out, errOut, code := deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "deputy serve", "/mcp", "Authorization: Bearer", ".deputy/token")
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("serve exit %d after SIGTERM\n%s", code, p.stderr)
	}
}
