package deputy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/deputy-run/deputy/store"
)

var executorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// checkExecutorID refuses an id DBOS and the workers table could not keep
// as it is.
func checkExecutorID(id string) error {
	if !executorName.MatchString(id) {
		return fmt.Errorf("executor id %q: want letters, digits, '.', '_' and '-', at most 63", id)
	}
	return nil
}

// machineExecutorID is the executor id a worker of a fleet on st works
// under when none is given: this machine's, kept in file (made on first
// use: the host name and 8 random hex digits), so a worker that restarts
// recovers its own runs at once; but when another live process on this
// machine works under it, this process takes a fresh one of its own (not
// kept), and fresh says so.
func machineExecutorID(ctx context.Context, st *store.Store, file string) (id string, fresh bool, err error) {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, host)
	host = strings.Trim(host[:min(len(host), 40)], ".-_")
	if host == "" {
		host = "worker"
	}
	kept, err := os.ReadFile(file)
	id = strings.TrimSpace(string(kept))
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && checkExecutorID(id) != nil):
		id = host + "-" + randomHex(4)
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", false, fmt.Errorf("executor id: %w", err)
		}
		if err := os.WriteFile(file, []byte(id+"\n"), 0o600); err != nil {
			return "", false, fmt.Errorf("executor id: %w", err)
		}
	case err != nil:
		return "", false, fmt.Errorf("executor id: %w", err)
	}
	ws, err := st.Workers(ctx)
	if err != nil {
		return "", false, fmt.Errorf("executor id: %w", err)
	}
	me, _ := os.Hostname()
	for _, w := range ws {
		if w.ID == id && (w.State == store.WorkerLive || w.State == store.WorkerDraining) && w.PID != os.Getpid() &&
			w.Host == me && alive(w.PID) {
			return host + "-" + randomHex(4), true, nil
		}
	}
	return id, false, nil
}

// alive reports whether a process pid exists on this machine.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
