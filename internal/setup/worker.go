package setup

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

// Home is deputy's own directory for what belongs to the machine rather
// than to a database file: $DEPUTY_HOME, else ~/.deputy.
func Home() string {
	if h := os.Getenv("DEPUTY_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".deputy")
	}
	return ".deputy"
}

// ExecutorEnv names this process's executor id when no flag does.
const ExecutorEnv = "DEPUTY_EXECUTOR_ID"

var executorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ExecutorID picks the executor id this process works under on a shared
// database. An explicit one (a flag, else $DEPUTY_EXECUTOR_ID) is taken as
// it is. Otherwise the machine's, kept in Home()/executor-id (made on
// first use: the host name and 8 random hex digits), so a worker that
// restarts recovers its own runs at once; but when another live process
// on this machine works under it, this process takes a fresh one of its
// own (not kept), and fresh says so.
func ExecutorID(ctx context.Context, st *store.Store, explicit string) (id string, fresh bool, err error) {
	if explicit == "" {
		explicit = os.Getenv(ExecutorEnv)
	}
	if explicit != "" {
		if !executorName.MatchString(explicit) {
			return "", false, fmt.Errorf("executor id %q: want letters, digits, '.', '_' and '-', at most 63", explicit)
		}
		return explicit, false, nil
	}
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
	path := filepath.Join(Home(), "executor-id")
	kept, err := os.ReadFile(path)
	id = strings.TrimSpace(string(kept))
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && !executorName.MatchString(id)):
		id = host + "-" + randomHex(4)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", false, fmt.Errorf("executor id: %w", err)
		}
		if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
			return "", false, fmt.Errorf("executor id: %w", err)
		}
	case err != nil:
		return "", false, fmt.Errorf("executor id: %w", err)
	}
	ws, err := st.Workers(ctx)
	if err != nil {
		return "", false, err
	}
	for _, w := range ws {
		if w.ID == id && (w.State == store.WorkerLive || w.State == store.WorkerDraining) && w.PID != os.Getpid() &&
			w.Host == hostname() && alive(w.PID) {
			return host + "-" + randomHex(4), true, nil
		}
	}
	return id, false, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
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
