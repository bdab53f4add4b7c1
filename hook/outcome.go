package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/permission"
)

// Outcome is what the hooks of one event decided, combined, in terms the
// agent loop acts on without knowing Claude Code's JSON. The zero value
// (no hook ran, or none had anything to say) changes nothing.
//
// What Block means depends on the event, as in Claude Code:
//   - PreToolUse: the call does not run; Reason is its tool_result
//     (is_error) for the model. Block is always set with Permission Deny.
//   - PostToolUse: the call ran; Reason is feedback given to the model
//     with its result.
//   - UserPromptSubmit: the prompt is dropped, not sent to the model;
//     Reason is for the person.
//   - Stop, SubagentStop: the agent does not stop; Reason is given to it
//     as a user message and it goes on (the next Stop input then has
//     StopHookActive).
//
// No other event can be blocked: an exit 2 there is one of Errors.
type Outcome struct {
	Block  bool
	Reason string
	// Permission is PreToolUse's verdict: permission.Default when no hook
	// gave one, else the strictest given (Deny over Ask over Allow).
	// Allow lets the call run without asking; deny and ask rules of the
	// permission settings still apply (Claude Code's reading).
	Permission       permission.Outcome
	PermissionReason string
	// UpdatedInput replaces the PreToolUse call's arguments, in deputy's
	// argument names (mapped back with FromClaude); nil when no hook gave
	// one.
	UpdatedInput json.RawMessage
	// Context is text for the model: additionalContext, and for
	// UserPromptSubmit and SessionStart the plain stdout of a hook that
	// exited 0, in hook order. For SubagentStart it is for the child
	// starting, not the parent.
	Context []string
	// Stop ends the agent's run (continue: false, whatever the event);
	// StopReason is for the person, not the model.
	Stop       bool
	StopReason string
	// SystemMessages (systemMessage) and Output (the plain stdout of a
	// hook that exited 0, for events where that is not context) are for
	// the person and the logs, never the model. (A JSON answer is never
	// shown as output, so suppressOutput has nothing left to hide.)
	SystemMessages []string
	Output         []string
	// Errors are non-blocking problems: a hook that could not start, was
	// not executable, timed out, exited with a code other than 0 or 2,
	// printed JSON that does not parse, or had its output cut. The run
	// goes on; each error names its hook.
	Errors []error
	// Ran is how many hooks ran.
	Ran int
}

// wireOutcome is Outcome as JSON, for recording a decision as a step
// (so a replay uses it instead of running the hooks again).
type wireOutcome struct {
	Block            bool            `json:"block,omitempty"`
	Reason           string          `json:"reason,omitempty"`
	Permission       string          `json:"permission,omitempty"`
	PermissionReason string          `json:"permission_reason,omitempty"`
	UpdatedInput     json.RawMessage `json:"updated_input,omitempty"`
	Context          []string        `json:"context,omitempty"`
	Stop             bool            `json:"stop,omitempty"`
	StopReason       string          `json:"stop_reason,omitempty"`
	SystemMessages   []string        `json:"system_messages,omitempty"`
	Output           []string        `json:"output,omitempty"`
	Errors           []string        `json:"errors,omitempty"`
	Ran              int             `json:"ran,omitempty"`
}

// MarshalJSON records the outcome; errors are kept as their messages.
func (o Outcome) MarshalJSON() ([]byte, error) {
	w := wireOutcome{Block: o.Block, Reason: o.Reason, PermissionReason: o.PermissionReason, UpdatedInput: o.UpdatedInput,
		Context: o.Context, Stop: o.Stop, StopReason: o.StopReason, SystemMessages: o.SystemMessages, Output: o.Output, Ran: o.Ran}
	if o.Permission != permission.Default {
		w.Permission = o.Permission.String()
	}
	for _, e := range o.Errors {
		w.Errors = append(w.Errors, e.Error())
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a recorded outcome back.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	var w wireOutcome
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, ok := parsePermission(w.Permission)
	if !ok && w.Permission != "" {
		return fmt.Errorf("hook outcome: permission %q", w.Permission)
	}
	*o = Outcome{Block: w.Block, Reason: w.Reason, Permission: p, PermissionReason: w.PermissionReason, UpdatedInput: w.UpdatedInput,
		Context: w.Context, Stop: w.Stop, StopReason: w.StopReason, SystemMessages: w.SystemMessages, Output: w.Output, Ran: w.Ran}
	for _, e := range w.Errors {
		o.Errors = append(o.Errors, errors.New(e))
	}
	return nil
}

func parsePermission(s string) (permission.Outcome, bool) {
	switch s {
	case "allow":
		return permission.Allow, true
	case "ask":
		return permission.Ask, true
	case "deny":
		return permission.Deny, true
	}
	return permission.Default, false
}

// blocking reports whether an event can be blocked (exit 2, decision:
// block).
func blocking(ev Event) bool {
	switch ev {
	case PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop:
		return true
	}
	return false
}

// plainIsContext reports whether a hook's plain stdout (exit 0) is added
// to the model's context, as Claude Code does for these events only.
func plainIsContext(ev Event) bool { return ev == UserPromptSubmit || ev == SessionStart }

// result is one hook's run.
type result struct {
	hook   *Hook
	exit   int // the command's exit code; 0 for an http hook's 2xx
	stdout string
	stderr string
	err    error   // it gave no answer: could not run, timed out, non-2xx
	notes  []error // non-blocking notes (output cut)
}

// answer is the JSON a hook may print (exit 0) or an http hook return
// (2xx), with Claude Code's field names.
type answer struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	SystemMessage      string `json:"systemMessage"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// parseAnswer reads stdout as a JSON answer. ok is false for output that
// is not a JSON object (plain text); err says why output that starts like
// one is not a valid answer.
func parseAnswer(stdout string) (a answer, ok bool, err error) {
	t := strings.TrimSpace(stdout)
	if !strings.HasPrefix(t, "{") {
		return a, false, nil
	}
	dec := json.NewDecoder(strings.NewReader(t))
	if err := dec.Decode(&a); err != nil {
		return answer{}, false, err
	}
	if dec.More() {
		return answer{}, false, errors.New("more than one JSON value")
	}
	return a, true, nil
}

// combiner folds results, in hook order, into an Outcome.
type combiner struct {
	ev      Event
	tool    string // PreToolUse's tool, for mapping updatedInput back
	dir     string
	o       Outcome
	reasons []string
	permBy  [4][]string // permission reasons by verdict
	updated string      // which hook's updatedInput was taken
}

func (c *combiner) add(r *result) {
	o := &c.o
	o.Ran++
	o.Errors = append(o.Errors, r.notes...)
	h := r.hook.String()
	if r.err != nil {
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s): %w", h, r.hook.Source, r.err))
		return
	}
	switch r.exit {
	case 0:
		c.exit0(r, h)
	case 2:
		msg := strings.TrimSpace(r.stderr)
		if !blocking(c.ev) {
			o.Errors = append(o.Errors, fmt.Errorf("%s (%s) exited 2 (%s cannot be blocked): %s", h, r.hook.Source, c.ev, orNone(msg)))
			return
		}
		if msg == "" {
			msg = fmt.Sprintf("blocked by %s (exit 2, no message)", h)
		}
		c.block(msg)
	default:
		why := ""
		switch r.exit {
		case 126:
			why = " (not executable)"
		case 127:
			why = " (command not found)"
		}
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s) exited %d%s: %s", h, r.hook.Source, r.exit, why, orNone(strings.TrimSpace(r.stderr))))
	}
}

func orNone(s string) string {
	if s == "" {
		return "no output on stderr"
	}
	return s
}

func (c *combiner) block(reason string) {
	c.o.Block = true
	c.reasons = append(c.reasons, reason)
	if c.ev == PreToolUse {
		c.permBy[permission.Deny] = append(c.permBy[permission.Deny], reason)
		c.o.Permission = permission.Deny
	}
}

// exit0 reads a successful hook's stdout: a JSON answer, or plain text.
// Invalid JSON is read as plain text, as Claude Code does, and noted.
func (c *combiner) exit0(r *result, h string) {
	o := &c.o
	a, ok, err := parseAnswer(r.stdout)
	if err != nil {
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s) printed output that starts like JSON but is not a valid answer (%v); read as plain text", h, r.hook.Source, err))
	}
	if !ok {
		if t := strings.TrimSpace(r.stdout); t != "" {
			if plainIsContext(c.ev) {
				o.Context = append(o.Context, t)
			} else {
				o.Output = append(o.Output, t)
			}
		}
		return
	}
	if a.Continue != nil && !*a.Continue {
		o.Stop = true
		if o.StopReason == "" {
			o.StopReason = a.StopReason
		}
	}
	if a.SystemMessage != "" {
		o.SystemMessages = append(o.SystemMessages, a.SystemMessage)
	}
	switch a.Decision {
	case "":
	case "block":
		if blocking(c.ev) {
			reason := a.Reason
			if reason == "" {
				reason = fmt.Sprintf("blocked by %s", h)
			}
			c.block(reason)
		} else {
			o.Errors = append(o.Errors, fmt.Errorf("%s (%s): decision block ignored: %s cannot be blocked", h, r.hook.Source, c.ev))
		}
	case "approve":
		if c.ev == PreToolUse { // the old spelling of permissionDecision: allow
			c.permit(permission.Allow, a.Reason)
		}
	default:
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s): decision %q is not block or approve; ignored", h, r.hook.Source, a.Decision))
	}
	hs := a.HookSpecificOutput
	if hs == nil {
		return
	}
	if hs.HookEventName != "" && hs.HookEventName != string(c.ev) {
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s): hookSpecificOutput is for %s, not %s; ignored", h, r.hook.Source, hs.HookEventName, c.ev))
		return
	}
	if hs.AdditionalContext != "" {
		o.Context = append(o.Context, hs.AdditionalContext)
	}
	if c.ev != PreToolUse {
		return
	}
	switch hs.PermissionDecision {
	case "":
	case "allow", "ask", "deny":
		p, _ := parsePermission(hs.PermissionDecision)
		if p == permission.Deny {
			reason := hs.PermissionDecisionReason
			if reason == "" {
				reason = fmt.Sprintf("denied by %s", h)
			}
			c.block(reason)
		} else {
			c.permit(p, hs.PermissionDecisionReason)
		}
	default:
		o.Errors = append(o.Errors, fmt.Errorf("%s (%s): permissionDecision %q is not allow, ask or deny; ignored", h, r.hook.Source, hs.PermissionDecision))
	}
	if len(bytes.TrimSpace(hs.UpdatedInput)) > 0 && !bytes.Equal(bytes.TrimSpace(hs.UpdatedInput), []byte("null")) {
		c.update(hs.UpdatedInput, r, h)
	}
}

func (c *combiner) permit(p permission.Outcome, reason string) {
	if reason != "" {
		c.permBy[p] = append(c.permBy[p], reason)
	}
	c.o.Permission = max(c.o.Permission, p)
}

// update takes the first hook's updatedInput. An updatedInput that does
// not map back blocks the call: running it unchanged is not what the hook
// asked for (Claude Code fails such a call on its input's validation).
func (c *combiner) update(in json.RawMessage, r *result, h string) {
	if c.updated != "" {
		c.o.Errors = append(c.o.Errors, fmt.Errorf("%s (%s): updatedInput ignored: %s gave one first", h, r.hook.Source, c.updated))
		return
	}
	_, args, err := FromClaude(ClaudeName(c.tool), in, c.dir)
	if err != nil {
		c.block(fmt.Sprintf("%s gave an updatedInput deputy cannot run: %v", h, err))
		return
	}
	c.updated = h
	c.o.UpdatedInput = args
}

func (c *combiner) done() Outcome {
	o := c.o
	o.Reason = strings.Join(c.reasons, "\n")
	if o.Permission != permission.Default {
		o.PermissionReason = strings.Join(c.permBy[o.Permission], "\n")
	}
	if o.Permission == permission.Deny {
		o.UpdatedInput = nil
	}
	return o
}
