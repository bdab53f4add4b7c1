package instance

import (
	"encoding/json"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Record is one agent instance, root or child: what it was asked and how it
// stands. The fields down to Description are its identity, fixed when it is
// listed; the rest change as it runs.
//
// Its JSON is what deputy shows of an instance: the HTTP API and the CLI's
// --json print View's, the durable engine checkpoints it whole. The keys
// id, parent, type, state, usage and report are on every object (a root's
// parent is ""), so a script finds them on each; the others are left out
// when empty. Record has no MarshalJSON of its own on purpose: the views
// that embed it (a tree's nodes) would take it over and lose their own
// fields.
type Record struct {
	ID string `json:"id"`
	// Parent is the spawning instance's id, "" for a root.
	Parent string `json:"parent"`
	// Root is the tree's root id; a root's Root is its own ID. Left empty
	// at creation in the store, it is filled in from the parent.
	Root string `json:"root"`
	// Depth is 0 for a root and the parent's depth + 1 for a child; left 0
	// for a child at creation in the store, it is filled in.
	Depth int `json:"depth"`
	// Type is the definition's name ("explorer"); Definition the snapshot of
	// the definition it runs with, as JSON, so a later edit of the
	// definition never changes a running instance (for a root, the durable
	// engine's spec). View leaves it out; nil in memory (agent).
	Type       string          `json:"type"`
	Definition json.RawMessage `json:"definition,omitempty"`
	Task       string          `json:"task,omitempty"`
	Mode       string          `json:"mode,omitempty"`  // agentdef.Mode: "fork", "isolated"; "" for a root
	Model      string          `json:"model,omitempty"` // provider:model
	// Description is what the spawn call said the child is for (a fan-out
	// task's id). The in-memory runtime keeps it; the store has no column
	// for it, so a stored record leaves it empty.
	Description string `json:"description,omitempty"`

	State State `json:"state"`
	// The result: set as the instance ends (the store's Finish), the
	// counters also as it runs.
	StopReason string    `json:"stop_reason,omitempty"`
	Incomplete bool      `json:"incomplete,omitempty"`
	Report     string    `json:"report"`
	Error      string    `json:"error,omitempty"`
	Usage      llm.Usage `json:"usage"`
	Cost       *float64  `json:"cost,omitempty"` // USD; nil: unpriced
	Turns      int       `json:"turns"`
	ToolCalls  int       `json:"tool_calls"`
	Artifacts  []string  `json:"artifacts,omitempty"` // files it wrote or edited
	// Question is its open question while it asks (or was paused while
	// asking). No store column holds it (the mailbox does): whoever shows
	// the record fills it in.
	Question string `json:"question,omitempty"`
	// Problems says what of its stored row could not be read (a damaged
	// row): the fields they name are left empty, and anything that shows
	// the record says so rather than passing the gap off as "none".
	Problems []string `json:"problems,omitempty"`

	// WorkflowID is the durable engine's workflow carrying the current (or
	// last) run.
	WorkflowID string    `json:"workflow_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"` // zero until terminal
}

// View is r as deputy shows an instance, in the HTTP API's answers and the
// CLI's --json alike: without its definition snapshot, which is large and
// which the definitions themselves show.
func (r Record) View() Record {
	r.Definition = nil
	return r
}

// Duration is how long the instance took, from its creation to its end
// (waits for a slot or an answer included); 0 until it ends.
func (r *Record) Duration() time.Duration {
	if !r.State.Terminal() || r.EndedAt.IsZero() {
		return 0
	}
	return r.EndedAt.Sub(r.CreatedAt)
}
