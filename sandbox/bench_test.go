package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool/shell"
)

// The added cost of a sandboxed shell call: the bash tool running `true`,
// directly and in a box (goal: under 20 ms more per call). The box is made
// once, as a child session makes it once for all its calls.

func benchShell(b *testing.B, cfg shell.Config) {
	set := plainBash(b, cfg)
	for b.Loop() {
		if out, isErr := runBash(context.Background(), set, "true", 0); isErr || !strings.HasSuffix(out, "[exit code: 0]") {
			b.Fatalf("%q", out)
		}
	}
}

func BenchmarkPlainShell(b *testing.B) {
	benchShell(b, shell.Config{Dir: b.TempDir()})
}

func BenchmarkSandboxedShell(b *testing.B) {
	requireBwrap(b)
	box := newBox(b, Policy{Workspace: b.TempDir()})
	benchShell(b, shell.Config{Dir: box.Dir(), Sandbox: box})
}
