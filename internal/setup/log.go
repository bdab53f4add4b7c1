package setup

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// LogEnv names the level of the engine's own log (DBOS's recovery,
// queues and workflow errors) written to stderr: debug, info, warn or
// error. Unset, that log is discarded: a run's progress is what a user
// reads, and the engine's log is for finding out why a worker did what
// it did.
const LogEnv = "DEPUTY_LOG"

// Logger is the engine's logger for $DEPUTY_LOG on w, nil when unset (the
// engine then discards its log). DBOS masks the database URL's password
// in what it logs; nothing else it logs carries a secret deputy holds.
func Logger(w io.Writer) (*slog.Logger, error) {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(LogEnv)))
	if v == "" || v == "off" {
		return nil, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(v)); err != nil {
		return nil, fmt.Errorf("$%s=%q: want debug, info, warn, error or off", LogEnv, v)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}
