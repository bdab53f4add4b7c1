package store

import "github.com/deputy-run/deputy/instance"

// The record and the state machine are package instance's: the store keeps
// instance.Record rows and moves them through instance.CanMove. These names
// exist for compatibility, so callers written against the store keep
// compiling; new code names the instance package.
type (
	// Instance is instance.Record.
	Instance = instance.Record
	// State is instance.State.
	State = instance.State
	// TransitionError is instance.TransitionError.
	TransitionError = instance.TransitionError
)

// The states, as instance names them.
const (
	Created   = instance.Created
	Running   = instance.Running
	Asking    = instance.Asking
	Paused    = instance.Paused
	Completed = instance.Completed
	Failed    = instance.Failed
	TimedOut  = instance.TimedOut
	Cancelled = instance.Cancelled
)

// States is instance.States.
func States() []State { return instance.States() }
