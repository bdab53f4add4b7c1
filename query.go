package deputy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/store"
)

// Filter selects instances for List: by tree, parent, roots only, states.
type Filter = store.Filter

// List returns the instances f selects, oldest first.
func (rt *Runtime) List(ctx context.Context, f Filter) ([]*Instance, error) {
	return rt.st.ListInstances(ctx, f)
}

// Definitions returns the subagent types the runtime spawns from (built-ins,
// Options.Sources' files, the database table, Options.Definitions), by
// name.
func (rt *Runtime) Definitions() []*Definition { return rt.eng.Catalog().List() }

// Definition returns the subagent type called name.
func (rt *Runtime) Definition(name string) (*Definition, bool) { return rt.eng.Catalog().Lookup(name) }

// Relay is what an instance relays: its state, report, artifacts and
// spending; its ToolResult is what a parent agent reads as the spawn
// tool's result.
type Relay = agent.Relay

// Relay returns instance id's relay. An instance that has not ended yet
// relays its state (and its question when it asks).
func (rt *Runtime) Relay(ctx context.Context, id string) (Relay, error) {
	in, err := rt.st.GetInstance(ctx, id)
	if err != nil {
		return Relay{}, err
	}
	return rt.relayOf(ctx, in)
}

func (rt *Runtime) relayOf(ctx context.Context, in *Instance) (Relay, error) {
	r := agent.RelayOf(in)
	if in.State == store.Asking {
		q, err := rt.Question(ctx, in.ID)
		if err != nil {
			return Relay{}, err
		}
		r.Question = q
	}
	return r, nil
}

// EventFilter selects events of the feed: all, one instance's, one tree's.
type EventFilter = store.EventFilter

// StoredEvent is one entry of the event feed, as the store keeps it.
type StoredEvent = store.Event

// Events lists the feed's events f selects, oldest first. Every process
// working on the database writes to the feed (state changes, progress,
// mail, tool calls), so it shows instances this runtime does not run.
func (rt *Runtime) Events(ctx context.Context, f EventFilter) ([]StoredEvent, error) {
	return rt.st.ListEvents(ctx, f)
}

// LastEventID is the newest event's id (0: none yet).
func (rt *Runtime) LastEventID(ctx context.Context) (int64, error) { return rt.st.LastEventID(ctx) }

// EventsWritten returns a channel closed when an event is next committed:
// by this process, and on Postgres by any (LISTEN/NOTIFY). On SQLite
// another process's events are only found by reading (Events).
func (rt *Runtime) EventsWritten() <-chan struct{} { return rt.st.EventsWritten() }

// PutDefinition parses a Markdown definition file (the .claude/agents
// format) and stores it in the database's definitions table, where every
// process's catalog finds it; this runtime's catalog has it at once. A file
// that does not parse is an error naming file:line; nothing is stored.
func (rt *Runtime) PutDefinition(ctx context.Context, file string, data []byte) (*Definition, error) {
	p := agentdef.ParseDefinition(file, data)
	if len(p.Errors) > 0 || p.Def == nil {
		return nil, &DefinitionError{Problems: p.Errors}
	}
	def, err := json.Marshal(p.Def)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := rt.st.PutDefinition(ctx, p.Def.Name, string(data), def); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := rt.eng.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("%s stored; the catalog did not refresh: %w", file, err)
	}
	return p.Def, nil
}

// DefinitionError lists why a definition file was refused, each problem
// with its file:line.
type DefinitionError struct{ Problems []agentdef.Issue }

// Error lists the problems, each with its file:line.
func (e *DefinitionError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	if len(msgs) == 0 {
		return "the definition is empty"
	}
	return strings.Join(msgs, "; ")
}
