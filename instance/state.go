package instance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// State is where an instance stands in its lifecycle.
type State string

// The states. Created, Running, Asking and Paused are active; the other four
// are terminal, and an instance ends in exactly one of them.
const (
	Created   State = "created"   // recorded, no run started yet
	Running   State = "running"   // a run is carrying it
	Asking    State = "asking"    // waiting for its parent's answer; no run
	Paused    State = "paused"    // stopped by request until resumed; no run
	Completed State = "completed" // finished its task
	Failed    State = "failed"    // ended by an error
	TimedOut  State = "timed_out" // ended by its time limit
	Cancelled State = "cancelled" // ended by request
)

// States lists every state, the active ones first.
func States() []State {
	return []State{Created, Running, Asking, Paused, Completed, Failed, TimedOut, Cancelled}
}

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case Created, Running, Asking, Paused, Completed, Failed, TimedOut, Cancelled:
		return true
	}
	return false
}

// Terminal reports whether s is a state an instance ends in.
func (s State) Terminal() bool {
	switch s {
	case Completed, Failed, TimedOut, Cancelled:
		return true
	}
	return false
}

// Active reports whether s is a valid state that is not terminal.
func (s State) Active() bool { return s.Valid() && !s.Terminal() }

// Waiting reports whether s is a state of an instance that stopped to wait,
// with no run carrying it: asking (for an answer) or paused (for a resume).
// A run that stops to wait (loop.StopSuspended) leaves its instance in one
// of them; neither is an end.
func (s State) Waiting() bool { return s == Asking || s == Paused }

// ParseState reads a state's name as a caller gives it (a query parameter,
// a tool's argument); a name that is no state is an error listing them,
// the same words wherever a state is asked for.
func ParseState(name string) (State, error) {
	if s := State(name); s.Valid() {
		return s, nil
	}
	names := make([]string, 0, 8)
	for _, s := range States() {
		names = append(names, string(s))
	}
	return "", fmt.Errorf("unknown state %q (the states: %s)", name, strings.Join(names, ", "))
}

// terminal are the states an instance ends in; every active state may move
// to any of them.
var terminal = []State{Completed, Failed, TimedOut, Cancelled}

// next is the whole state machine, the terminal moves included through
// init. The choices worth knowing:
//   - asking → paused: pausing a tree pauses a child waiting for its
//     parent's answer too; the answer waits in its mailbox, and the resume
//     (paused → running) lets it read it, or ask again (running → asking).
//   - paused → asking is not a move: a resumed instance runs first.
//   - created → paused is not a move: an instance not started yet has
//     nothing to stop; it is cancelled or started.
//   - no state moves to itself: a repeated transition is a *TransitionError
//     with From == To, which a caller replaying after a crash can recognise.
var next = map[State][]State{
	Created: {Running},
	Running: {Asking, Paused},
	Asking:  {Running, Paused},
	Paused:  {Running},
}

func init() {
	for from := range next {
		next[from] = append(next[from], terminal...)
	}
}

// CanMove reports whether the state machine allows from → to.
func CanMove(from, to State) bool { return slices.Contains(next[from], to) }

var (
	// ErrIllegalTransition: the state machine does not allow the move; the
	// error is a *TransitionError naming both states.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrTerminal: the instance has ended, and an ended instance never
	// changes again.
	ErrTerminal = errors.New("instance has ended")
)

// TransitionError reports a transition the state machine refuses.
// errors.Is(err, ErrIllegalTransition) holds for it. From == To means the
// instance is already in the state asked for, which a caller repeating a
// write after a crash may treat as done.
type TransitionError struct {
	ID       string
	From, To State
}

// Move returns nil when the state machine allows instance id to move from
// → to, and the *TransitionError that says why not otherwise.
func Move(id string, from, to State) error {
	if CanMove(from, to) {
		return nil
	}
	return &TransitionError{ID: id, From: from, To: to}
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
