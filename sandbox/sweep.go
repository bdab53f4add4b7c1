package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// statePrefix names a box's directories in the state directory after the
// deputy process that made them, so Sweep can tell which are orphans.
func statePrefix(kind string) string {
	return fmt.Sprintf("deputy-%s-%d-", kind, os.Getpid())
}

// Sweep removes what boxes of deputy processes that are no longer running
// left in stateDir (os.TempDir() if ""): snapshots, /tmp directories, and
// the placeholders they made in workspaces for absent protected paths
// (those still empty, and that no live box records binding: guard.go).
// Their processes died with them (bwrap's --die-with-parent) and their
// cgroups are removed by the next New; a snapshot's uncommitted changes
// are lost with the process. The worker calls it on recovery. A pid reused
// by another process keeps its directories until that one is gone too.
func Sweep(stateDir string) error {
	if stateDir == "" {
		stateDir = os.TempDir()
	}
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return fmt.Errorf("sandbox: sweep %s: %w", stateDir, err)
	}
	var errs []error
	if err := sweepPlaceholders(stateDir); err != nil {
		errs = append(errs, err)
	}
	for _, e := range ents {
		pid, ok := stateOwner(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() || alive(pid) || strings.HasPrefix(e.Name(), "deputy-guard-") {
			continue
		}
		if err := removeTree(filepath.Join(stateDir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: sweep: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stateOwner parses "deputy-KIND-PID-RANDOM".
func stateOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "deputy-")
	if !ok {
		return 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || (f[0] != "tmp" && f[0] != "snapshot" && f[0] != "guard") {
		return 0, false
	}
	pid, err := strconv.Atoi(f[1])
	return pid, err == nil && pid > 0
}
