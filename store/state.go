package store

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

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to State) bool {
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}
