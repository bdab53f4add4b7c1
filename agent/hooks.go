package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/permission"
)

// Hooks are the Claude Code hooks a tree runs (issue 20): the settings
// files' for every instance, each instance's definition's own on top
// (Claude Code's behaviour: settings hooks apply to subagents too), with
// SubagentStart and SubagentStop run in the parent's configuration.
//
// Where each event runs, and what its answer does:
//
//   - SessionStart (a root's first run: startup; a later one: resume) and
//     UserPromptSubmit (the root's task): their context joins the first
//     message; a block drops the prompt (the run ends halted before any
//     model call, the reason is for the person).
//   - SubagentStart (a child's first run): its context joins the child's
//     first message.
//   - PreToolUse, in the call's gate, before the permission policy: deny
//     answers the call with the reason, ask holds it, allow skips the
//     mode's prompt only (the policy's deny and ask rules still apply),
//     updatedInput is what the tool runs with; its context joins the
//     result.
//   - PostToolUse, after the call, in the same step: a block's reason and
//     any context join the result the model reads.
//   - Stop (a root) and SubagentStop (a child), when the model answers
//     without calling a tool: a block sends it back to work with the
//     reason as a user message; the next time, stop_hook_active is true.
//   - continue: false at any event ends the run (loop.StopHalted), the
//     stopReason being for the person.
//
// Errors, system messages and plain output are for the person and the
// logs: they are EventHook events, never sent to the model.
type Hooks struct {
	// Settings are the settings files' hooks (hook.LoadSettings over
	// permission.SettingsPaths); nil: only definitions' hooks.
	Settings *hook.Config
	// Runner is what every instance's hook runner is made from: its
	// ProjectDir (CLAUDE_PROJECT_DIR, and where hooks of an unfenced
	// instance run), Env, PassEnv, Clock, HTTPClient, MaxOutput, Shell.
	// Its Config and Starter are set per instance (a fenced child's
	// hooks start in its box).
	Runner hook.Runner
	// TranscriptDir, when set, holds each instance's JSONL transcript,
	// TranscriptDir/ID.jsonl, which transcript_path names. The CLI puts
	// it under the workspace's state directory, .deputy/transcripts/.
	// Empty: hooks get no transcript_path.
	TranscriptDir string
	// PermissionMode is what permission_mode says (Claude Code's name
	// of the tree's mode); "default" when empty.
	PermissionMode string
}

// HookRecorder is implemented by a step runner (loop.Steps) that records
// a hook's decision as a step of the instance's run: fn runs the hooks and
// returns their Outcome encoded; a replay after a crash returns the
// recorded bytes without running fn, so no hook runs twice. name is
// stable across executions (turn-N/hook-Stop). A runner that does not
// implement it (loop.Direct) runs fn directly.
type HookRecorder interface {
	RecordHook(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error)
}

// EventHook is an Event of hooks that ran (Event.Hook): what they said for
// the person and the logs, and their errors. A value apart from the
// others, so that kinds added there do not move it.
const EventHook EventKind = 64

// HookReport is what one event's hooks did, for the person and the logs.
type HookReport struct {
	Event   hook.Event
	Tool    string // PreToolUse, PostToolUse: the call's tool
	Outcome hook.Outcome
}

// haltMark starts what a call's result says when a hook's continue: false
// ended the run there: the marker by which the run, replaying the
// call's checkpointed result, halts again at the same place.
const haltMark = "[deputy] A hook stopped the run: "

// hookState is one run of one instance with hooks.
type hookState struct {
	tr    *tree
	n     *node
	run   *hook.Runner // the instance's: settings, then its definition's
	up    *hook.Runner // its parent's, for SubagentStart and SubagentStop; nil for a root
	typ   string       // the instance's type
	steps loop.Steps
	ts    *hook.Transcript
	base  hook.Input // the fields every event's input shares

	// msgs is the conversation as the run's events told it (the run's
	// goroutine only: OnEvent and Hold).
	msgs       []llm.Message
	stopActive bool

	mu     sync.Mutex
	halt   string
	halted bool
	extra  map[string][]string // PreToolUse context for each call id, until its result
}

// defHooks reads a definition's hooks front matter (nil when it has none),
// reported at the file:line of its hooks key.
func defHooks(def *agentdef.Definition) (*hook.Config, error) {
	if def == nil || def.Hooks == nil {
		return nil, nil
	}
	c, err := hook.FromFrontMatter(cmpOrHook(def.Hooks.File, def.Name), def.Hooks.Line, def.Hooks.Value)
	if err != nil {
		return nil, fmt.Errorf("subagent type %s: hooks: %w", def.Name, err)
	}
	return c, nil
}

func cmpOrHook(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hookConfig is the hooks in force for an instance of def: the settings'
// and then def's.
func (h *Hooks) config(def *agentdef.Definition) (all, own *hook.Config, err error) {
	if own, err = defHooks(def); err != nil {
		return nil, nil, err
	}
	all = h.Settings
	switch {
	case all == nil:
		all = own
	case own != nil:
		all = all.Merge(own)
	}
	return all, own, nil
}

// startHooks prepares n's hooks for this run and runs those of its start:
// SessionStart and UserPromptSubmit for a root, SubagentStart for a child,
// on a conversation that starts here (fresh: its last message is the
// task). It returns the messages to run with (the task's message with the
// hooks' context added), and a result when a hook ended the run before it
// began. hs is nil when the tree has no hooks.
func (tr *tree) startHooks(ctx context.Context, n *node, msgs []llm.Message) (hs *hookState, _ []llm.Message, early *loop.Result, err error) {
	h := tr.r.Hooks
	if h == nil {
		return nil, msgs, nil, nil
	}
	own, def, err := h.config(n.def)
	if err != nil {
		return nil, msgs, &loop.Result{Messages: msgs, StopReason: loop.StopStepError}, err
	}
	var upCfg *hook.Config
	if n.parent != nil {
		if upCfg, _, err = h.config(n.parent.def); err != nil {
			return nil, msgs, &loop.Result{Messages: msgs, StopReason: loop.StopStepError}, err
		}
	}
	if own.Empty() && upCfg.Empty() {
		return nil, msgs, nil, nil
	}
	tr.mu.Lock()
	id, typ, task := n.inst.ID, n.inst.Type, n.inst.Task
	tr.mu.Unlock()
	hs = &hookState{tr: tr, n: n, typ: typ, steps: n.cfg.Steps, extra: map[string][]string{}}
	cwd := h.Runner.ProjectDir
	var starter hook.Starter
	if f := n.fence; f != nil {
		starter = f.Starter
		if f.Dir != "" {
			cwd = f.Dir
		}
	}
	mk := func(c *hook.Config) *hook.Runner {
		if c.Empty() {
			return nil
		}
		r := h.Runner
		r.Config, r.Starter = c, starter
		return &r
	}
	hs.run, hs.up = mk(own), mk(upCfg)
	hs.base = hook.Input{SessionID: id, Cwd: cwd, PermissionMode: cmpOrHook(h.PermissionMode, "default")}
	if h.TranscriptDir != "" {
		opt := hook.TranscriptOptions{SessionID: id, Cwd: cwd, Clock: tr.clock}
		if n.parent != nil {
			opt.AgentID = id
		}
		ts, err := hook.OpenTranscript(filepath.Join(h.TranscriptDir, id+".jsonl"), opt)
		if err != nil {
			return nil, msgs, &loop.Result{Messages: msgs, StopReason: loop.StopStepError}, err
		}
		hs.ts, hs.base.TranscriptPath = ts, ts.Path()
	}
	for _, e := range skipped(def) {
		tr.emit(n, Event{Kind: EventHook, Hook: &HookReport{Event: hook.SessionStart, Outcome: hook.Outcome{Errors: []error{e}}}})
	}
	fresh := len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.User && strings.Contains(msgs[len(msgs)-1].Text(), task)
	var context []string
	start := func(ev hook.Event, r *hook.Runner, in hook.Input) (hook.Outcome, error) {
		if r == nil || !r.Has(ev) {
			return hook.Outcome{}, nil
		}
		o, err := hs.record(ctx, "turn-0/hook-"+string(ev), ev, "", r, in)
		context = append(context, o.Context...)
		return o, err
	}
	var o hook.Outcome
	switch {
	case n.parent == nil:
		in := hs.input(hook.SessionStart)
		in.Source = "resume"
		if fresh && len(msgs) == 1 {
			in.Source = "startup"
		}
		if o, err = start(hook.SessionStart, hs.run, in); err == nil && !o.Stop && fresh {
			in = hs.input(hook.UserPromptSubmit)
			in.Prompt = task
			o, err = start(hook.UserPromptSubmit, hs.run, in)
		}
	case fresh:
		in := hs.input(hook.SubagentStart)
		in.AgentID, in.AgentType = id, typ
		o, err = start(hook.SubagentStart, hs.up, in)
	}
	switch {
	case err != nil:
		hs.close()
		return nil, msgs, &loop.Result{Messages: msgs, StopReason: loop.StopStepError}, err
	case o.Stop || o.Block:
		// A blocked prompt is dropped: the model never sees it.
		hs.close()
		return nil, msgs, &loop.Result{Messages: msgs, StopReason: loop.StopHalted}, nil
	}
	if len(context) > 0 {
		msgs = withContext(msgs, context)
	}
	hs.msgs = msgs
	hs.sync()
	return hs, msgs, nil, nil
}

// skipped are the entries of a definition's hooks that did not load.
func skipped(c *hook.Config) []error {
	if c == nil {
		return nil
	}
	return c.Skipped
}

// withContext adds hooks' context to the conversation's last (user)
// message as text blocks of its own, in a copy: msgs may share its
// backing array with a parent's transcript.
func withContext(msgs []llm.Message, context []string) []llm.Message {
	out := make([]llm.Message, len(msgs))
	copy(out, msgs)
	last := &out[len(out)-1]
	content := make([]llm.Block, 0, len(last.Content)+len(context))
	content = append(content, last.Content...)
	for _, c := range context {
		content = append(content, llm.Text(c))
	}
	last.Content = content
	return out
}

// input is an input of event ev with the fields every event has.
func (hs *hookState) input(ev hook.Event) hook.Input {
	in := hs.base
	in.Event = ev
	return in
}

// record runs r's hooks for in as the step name (through HookRecorder
// when the instance's steps record), reporting what they did.
func (hs *hookState) record(ctx context.Context, name string, ev hook.Event, tool string, r *hook.Runner, in hook.Input) (hook.Outcome, error) {
	run := func(ctx context.Context) hook.Outcome {
		o := r.Run(ctx, in)
		hs.report(ev, tool, o)
		return o
	}
	rec, ok := hs.steps.(HookRecorder)
	if !ok {
		return run(ctx), nil
	}
	b, err := rec.RecordHook(ctx, name, func(ctx context.Context) ([]byte, error) { return json.Marshal(run(ctx)) })
	if err != nil {
		return hook.Outcome{}, fmt.Errorf("%s: %w", name, err)
	}
	var o hook.Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		return hook.Outcome{}, fmt.Errorf("%s: the recorded outcome: %w", name, err)
	}
	return o, nil
}

// report emits what ev's hooks did, when any ran.
func (hs *hookState) report(ev hook.Event, tool string, o hook.Outcome) {
	if o.Ran == 0 && len(o.Errors) == 0 {
		return
	}
	hs.tr.emit(hs.n, Event{Kind: EventHook, Hook: &HookReport{Event: ev, Tool: tool, Outcome: o}})
}

// sync brings the instance's transcript file up to date, so the hooks
// about to run read whole lines; a transcript that cannot be written is
// reported, not fatal (the hooks still run, on what the file has).
//
// A run replayed after a crash starts again from its first messages while
// the file already holds what the earlier execution wrote: the file is
// written to only once the conversation is longer than what it holds
// (compactions are written by observe, from their event).
func (hs *hookState) sync() {
	if hs.ts == nil || len(hs.msgs) <= hs.ts.Written() {
		return
	}
	if err := hs.ts.Sync(hs.msgs); err != nil {
		hs.report(hook.SessionStart, "", hook.Outcome{Errors: []error{fmt.Errorf("transcript: %w", err)}})
	}
}

func (hs *hookState) close() {
	if hs != nil && hs.ts != nil {
		_ = hs.ts.Close()
	}
}

// stopRun notes that a hook's continue: false ends the run.
func (hs *hookState) stopRun(reason string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if !hs.halted {
		hs.halted, hs.halt = true, reason
	}
}

func (hs *hookState) stopped() (string, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.halt, hs.halted
}

// wire sets cfg's gate, after, hold, inbox and event hooks for n's hooks.
func (hs *hookState) wire(cfg *loop.Config) {
	if hs.run != nil && hs.run.Has(hook.PreToolUse) {
		cfg.Gate = hs.gate(cfg.Gate)
	}
	if hs.run != nil && (hs.run.Has(hook.PreToolUse) || hs.run.Has(hook.PostToolUse)) {
		cfg.After = hs.after
	}
	cfg.Hold = hs.hold(cfg.Hold)
	inbox := cfg.Inbox
	cfg.Inbox = func(ctx context.Context, turn int) ([]string, loop.StopReason, error) {
		if why, ok := hs.stopped(); ok {
			return nil, "", &loop.Halt{Reason: why}
		}
		if inbox == nil {
			return nil, "", nil
		}
		return inbox(ctx, turn)
	}
	onEvent := cfg.OnEvent
	cfg.OnEvent = func(e loop.Event) {
		hs.observe(e)
		if onEvent != nil {
			onEvent(e)
		}
	}
}

// observe keeps the conversation and the transcript file up to date from
// the run's events, and halts a run whose replayed call result says a hook
// stopped it.
func (hs *hookState) observe(e loop.Event) {
	switch e.Kind {
	case loop.EventMessage:
		hs.msgs = append(hs.msgs, e.Message)
		hs.sync()
	case loop.EventCompaction:
		kept := hs.msgs[max(0, len(hs.msgs)-e.Kept):]
		hs.msgs = append([]llm.Message{e.Message}, kept...)
		if hs.ts != nil {
			if err := hs.ts.Compacted(hs.msgs); err != nil {
				hs.report(hook.PreCompact, "", hook.Outcome{Errors: []error{fmt.Errorf("transcript: %w", err)}})
			}
		}
	case loop.EventToolResult:
		if i := strings.Index(e.Block.Text, haltMark); i >= 0 {
			why, _, _ := strings.Cut(e.Block.Text[i+len(haltMark):], "\n")
			hs.stopRun(why)
		}
	}
}

// hookSayKey carries, in the context of a call's permission gate, what
// a PreToolUse hook decided about it (hookDecision).
type hookSayKey struct{}

type hookSay struct {
	outcome permission.Outcome // Allow or Ask
	reason  string
}

// hookDecision is the policy's decision d about a call as a PreToolUse
// hook's answer changes it (Claude Code's reading): a hook's allow skips
// the mode's prompt (an ask that no ask rule made) but not an ask or deny
// rule; a hook's ask asks even where the policy would allow.
func hookDecision(ctx context.Context, d permission.Decision) permission.Decision {
	say, ok := ctx.Value(hookSayKey{}).(hookSay)
	switch {
	case !ok:
	case say.outcome == permission.Allow && d.Outcome == permission.Ask && d.Rule == "":
		return permission.Decision{Outcome: permission.Allow, Reason: cmpOrHook(say.reason, "a PreToolUse hook allowed it")}
	case say.outcome == permission.Ask && d.Outcome == permission.Allow:
		return permission.Decision{Outcome: permission.Ask, Reason: cmpOrHook(say.reason, "a PreToolUse hook asks")}
	}
	return d
}

// gate runs PreToolUse hooks, then the permission gate (inner, nil when
// the tree enforces no policy) on what they leave. It runs inside the
// call's own step: under the durable engine a call whose result was
// checkpointed is replayed without reaching the gate, so its hooks never
// run twice (a read-only call cut by a crash before its checkpoint runs
// again, hooks and all, as the call itself does).
func (hs *hookState) gate(inner loop.GateFunc) loop.GateFunc {
	return func(ctx context.Context, c *loop.Call, name string, input json.RawMessage) loop.GateResult {
		in := hs.input(hook.PreToolUse)
		in.Tool, in.ToolInput, in.ToolUseID = name, input, c.ID
		o := hs.run.Run(ctx, in)
		hs.report(hook.PreToolUse, name, o)
		if o.Stop {
			hs.stopRun(o.StopReason)
			return loop.GateResult{Verdict: loop.GateDeny, Reason: haltMark + cmpOrHook(o.StopReason, "continue: false")}
		}
		if len(o.Context) > 0 {
			hs.mu.Lock()
			hs.extra[c.ID] = o.Context
			hs.mu.Unlock()
		}
		switch o.Permission {
		case permission.Deny:
			return loop.GateResult{Verdict: loop.GateDeny, Reason: cmpOrHook(o.Reason, cmpOrHook(o.PermissionReason, "a PreToolUse hook denied the call"))}
		case permission.Ask:
			if inner == nil {
				return loop.GateResult{Verdict: loop.GateAsk, Reason: cmpOrHook(o.PermissionReason, "a PreToolUse hook asks")}
			}
		}
		if o.Permission == permission.Allow || o.Permission == permission.Ask {
			ctx = context.WithValue(ctx, hookSayKey{}, hookSay{o.Permission, o.PermissionReason})
		}
		run := input
		if o.UpdatedInput != nil {
			run = o.UpdatedInput
		}
		if inner == nil {
			return loop.GateResult{Input: o.UpdatedInput, Reason: o.PermissionReason}
		}
		r := inner(ctx, c, name, run)
		if r.Verdict == loop.GateAllow && len(r.Input) == 0 {
			r.Input = o.UpdatedInput
		}
		return r
	}
}

// after runs PostToolUse hooks on a call's result and gives the model
// their feedback and context with it (and the PreToolUse context of the
// call). It runs in the call's step, as the gate does.
func (hs *hookState) after(ctx context.Context, c *loop.Call, name string, input json.RawMessage, res llm.Block) llm.Block {
	hs.mu.Lock()
	notes := hs.extra[c.ID]
	delete(hs.extra, c.ID)
	hs.mu.Unlock()
	if hs.run.Has(hook.PostToolUse) {
		in := hs.input(hook.PostToolUse)
		in.Tool, in.ToolInput, in.ToolUseID = name, input, c.ID
		in.ToolOutput, in.ToolError = res.Text, res.IsError
		o := hs.run.Run(ctx, in)
		hs.report(hook.PostToolUse, name, o)
		if o.Block {
			notes = append(notes, "PostToolUse hook feedback: "+cmpOrHook(o.Reason, "(no reason given)"))
		}
		notes = append(notes, o.Context...)
		if o.Stop {
			hs.stopRun(o.StopReason)
			notes = append(notes, haltMark+cmpOrHook(o.StopReason, "continue: false"))
		}
	}
	if len(notes) > 0 {
		res.Text += "\n\n" + strings.Join(notes, "\n\n")
	}
	return res
}

// hold runs, once inner (the instance's background children) has nothing
// more for it, the Stop hooks of a root or the SubagentStop hooks of a
// child (its parent's), recorded as the step turn-N/hook-EVENT.
func (hs *hookState) hold(inner loop.HoldFunc) loop.HoldFunc {
	ev, r := hook.Stop, hs.run
	if hs.n.parent != nil {
		ev, r = hook.SubagentStop, hs.up
	}
	return func(ctx context.Context, turn int) ([]string, error) {
		if inner != nil {
			if notes, err := inner(ctx, turn); err != nil || len(notes) > 0 {
				return notes, err
			}
		}
		if r == nil || !r.Has(ev) {
			return nil, nil
		}
		in := hs.input(ev)
		in.StopHookActive = hs.stopActive
		if n := len(hs.msgs); n > 0 && hs.msgs[n-1].Role == llm.Assistant {
			in.LastAssistantMessage = hs.msgs[n-1].Text()
		}
		if ev == hook.SubagentStop {
			in.AgentID, in.AgentType, in.AgentTranscriptPath = hs.base.SessionID, hs.typ, hs.base.TranscriptPath
		}
		o, err := hs.record(ctx, fmt.Sprintf("turn-%d/hook-%s", turn, ev), ev, "", r, in)
		switch {
		case err != nil:
			return nil, err
		case o.Stop:
			return nil, &loop.Halt{Reason: o.StopReason}
		case o.Block:
			hs.stopActive = true
			return []string{cmpOrHook(o.Reason, "A "+string(ev)+" hook asked you to go on.")}, nil
		}
		return nil, nil
	}
}
