package store

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound: no instance, run or mail with that id.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition: the state machine does not allow the move; the
	// error is a *TransitionError naming both states.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrTerminal: the instance has ended, and an ended instance never
	// changes again.
	ErrTerminal = errors.New("instance has ended")
	// ErrConflict: a repeated write (same id, same sequence number) carries
	// content different from what is stored. Repeating a write with the same
	// content is never an error.
	ErrConflict = errors.New("conflicts with what is stored")
	// ErrAlreadyConsumed: the mail was consumed before.
	ErrAlreadyConsumed = errors.New("mail already consumed")
	// ErrNewerSchema: the database was migrated by a newer deputy. Nothing
	// was changed; upgrade deputy to use it.
	ErrNewerSchema = errors.New("database schema is newer than this deputy knows")
	// ErrLocked: another connection or process held the database locked
	// past the busy timeout.
	ErrLocked = errors.New("database is locked")
	// ErrCorrupt: the file is not a SQLite database, or a damaged one.
	ErrCorrupt = errors.New("database file is not a usable SQLite database")
)

// TransitionError reports a transition the state machine refuses.
// errors.Is(err, ErrIllegalTransition) holds for it. From == To means the
// instance is already in the state asked for, which a caller repeating a
// write after a crash may treat as done.
type TransitionError struct {
	ID       string
	From, To State
}

func (e *TransitionError) Error() string {
	switch {
	case !e.To.Valid():
		return fmt.Sprintf("instance %s: %v: %q is not a state", e.ID, ErrIllegalTransition, string(e.To))
	case e.From.Terminal():
		return fmt.Sprintf("instance %s: %v: it ended %s, and cannot become %s", e.ID, ErrIllegalTransition, e.From, e.To)
	}
	return fmt.Sprintf("instance %s: %v from %s to %s", e.ID, ErrIllegalTransition, e.From, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) hold, and
// errors.Is(err, ErrTerminal) when the instance had ended.
func (e *TransitionError) Is(target error) bool {
	return target == ErrIllegalTransition || (target == ErrTerminal && e.From.Terminal())
}
