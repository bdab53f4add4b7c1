package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Manager reaches children that outlive a spawn call: background children,
// and children that asked (see Runner.Manager). Every method acts for
// parent on its own children only. The durable engine implements it.
type Manager interface {
	// Wait returns once one of ids (all of them, with all) has ended or
	// is asking, or when timeout passes; it reports on each of ids.
	Wait(ctx context.Context, parent string, ids []string, all bool, timeout time.Duration) ([]Status, error)
	Status(ctx context.Context, parent, id string) (Status, error)
	List(ctx context.Context, parent string) ([]Status, error)
	Send(ctx context.Context, parent, id, text string) error
	Pause(ctx context.Context, parent, id string) error
	Resume(ctx context.Context, parent, id string) error
	Cancel(ctx context.Context, parent, id string) error
	Answer(ctx context.Context, parent, id, answer string) error
}

// Status is what a parent learns of a child.
type Status struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	State     instance.State `json:"state"`
	Turns     int            `json:"turns"`
	ToolCalls int            `json:"tool_calls"`
	Usage     llm.Usage      `json:"usage"`
	Question  string         `json:"question,omitempty"` // while asking
	// Approval is the call it waits to have approved, while asking for
	// one (Question then says so in words).
	Approval *Approval `json:"approval,omitempty"`
	// Relay is the child's relay (Relay.ToolResult) once it has ended.
	Relay string `json:"relay,omitempty"`
}

// DefaultWaitTimeout bounds subagent_wait when the model gives no timeout.
const DefaultWaitTimeout = 10 * time.Minute

const idProp = `"id":{"type":"string","minLength":1,"description":"The subagent's instance id, as spawn_subagent returned it."}`

// manageTool is one of the subagent_* tools.
type manageTool struct {
	tree       *tree
	name, desc string
	schema     string
	run        func(ctx context.Context, m Manager, parent string, in manageInput) (string, error)
	isReadOnly bool
}

type manageInput struct {
	ID      string   `json:"id"`
	IDs     []string `json:"ids"`
	All     bool     `json:"all"`
	Timeout float64  `json:"timeout_seconds"`
	Message string   `json:"message"`
	Answer  string   `json:"answer"`
	Approve *bool    `json:"approve"`
	Reason  string   `json:"reason"`
}

func (t *manageTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Description: t.desc, InputSchema: json.RawMessage(t.schema)}
}

// ReadOnly: status and list only read; the others act.
func (t *manageTool) ReadOnly() bool { return t.isReadOnly }

// Resumable: each is safe to run again after a crash (a wait waits again
// and reports from the records; the rest are idempotent or refused the
// second time with a clear error).
func (t *manageTool) Resumable() bool { return true }

// Concurrent: they only reach other instances.
func (t *manageTool) Concurrent() bool { return true }

func (t *manageTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	n, in, err := callInput[manageInput](ctx, t.name, raw)
	if err != nil {
		return "", err
	}
	return t.run(ctx, t.tree.r.Manager, n.inst.ID, in)
}

// manageTools are the subagent_* tools of a tree.
func manageTools(tr *tree) []tool.Tool {
	one := func(name, desc string, ro bool, run func(context.Context, Manager, string, manageInput) (string, error), props ...string) tool.Tool {
		req := `"id"`
		all := append([]string{idProp}, props...)
		for _, p := range props {
			req += `,"` + strings.SplitN(strings.TrimPrefix(p, `"`), `"`, 2)[0] + `"`
		}
		schema := `{"type":"object","properties":{` + strings.Join(all, ",") + `},"required":[` + req + `],"additionalProperties":false}`
		return &manageTool{tree: tr, name: name, desc: desc, schema: schema, run: run, isReadOnly: ro}
	}
	return []tool.Tool{
		&manageTool{tree: tr, name: agentdef.WaitTool, isReadOnly: false, desc: "Wait for subagents you started: until one " +
			"of them (all of them, with all: true) has ended or is asking you a question, or the timeout passes. " +
			"Returns each one's state, the reports of those that ended, and the questions of those asking.",
			schema: `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"minItems":1,"description":"Instance ids of your subagents."},` +
				`"all":{"type":"boolean","description":"Wait for all of them, not just the first."},` +
				`"timeout_seconds":{"type":"number","minimum":0,"description":"Give up waiting after this long (default 600)."}},` +
				`"required":["ids"],"additionalProperties":false}`,
			run: func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				timeout := DefaultWaitTimeout
				if in.Timeout > 0 {
					timeout = time.Duration(in.Timeout * float64(time.Second))
				}
				sts, err := m.Wait(ctx, parent, in.IDs, in.All, timeout)
				return renderStatuses(sts), err
			}},
		one(agentdef.StatusTool, "How a subagent you started is doing: its state, turns, tokens, and its question if it asks one.", true,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				st, err := m.Status(ctx, parent, in.ID)
				return renderStatuses([]Status{st}), err
			}),
		&manageTool{tree: tr, name: agentdef.ListTool, isReadOnly: true, desc: "List the subagents you started, with their states.",
			schema: `{"type":"object","properties":{},"additionalProperties":false}`,
			run: func(ctx context.Context, m Manager, parent string, _ manageInput) (string, error) {
				sts, err := m.List(ctx, parent)
				if err == nil && len(sts) == 0 {
					return "You have started no subagents.", nil
				}
				return renderStatuses(sts), err
			}},
		one(agentdef.SendTool, "Send a running subagent a message: it reads it at its next turn. Use it to steer or correct one.", false,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				return "sent to " + in.ID + "; it reads the message at its next turn", m.Send(ctx, parent, in.ID, in.Message)
			}, `"message":{"type":"string","minLength":1}`),
		one(agentdef.PauseTool, "Pause a subagent: it stops at its next turn until resumed.", false,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				return "paused " + in.ID + " (a running one stops at its next turn)", m.Pause(ctx, parent, in.ID)
			}),
		one(agentdef.ResumeTool, "Resume a paused subagent.", false,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				return "resumed " + in.ID, m.Resume(ctx, parent, in.ID)
			}),
		one(agentdef.CancelTool, "Cancel a subagent and the subagents it started; what they did so far is kept and reported.", false,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				return "cancelled " + in.ID + "; subagent_wait returns its partial report", m.Cancel(ctx, parent, in.ID)
			}),
		one(agentdef.AnswerTool, "Answer the question a subagent asked you; it goes on with the answer. Then subagent_wait for its report.", false,
			func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
				return "answered " + in.ID + "; it goes on", m.Answer(ctx, parent, in.ID, in.Answer)
			}, `"answer":{"type":"string","minLength":1}`),
		approveTool(tr),
	}
}

// renderStatuses is the text a parent model reads about its children: a
// line per child, then the relays of those that ended.
func renderStatuses(sts []Status) string {
	var b strings.Builder
	for _, s := range sts {
		fmt.Fprintf(&b, "%s (%s): %s, %d turns, %d tokens", s.ID, s.Type, s.State, s.Turns, s.Usage.Total())
		if s.Question != "" {
			b.WriteString("; asks: " + s.Question)
		}
		b.WriteByte('\n')
	}
	for _, s := range sts {
		if s.Relay != "" {
			b.WriteString("\n" + s.Relay + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
