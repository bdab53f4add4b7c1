package telemetry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// scope names the instrumentation in every exported span.
const scope = "github.com/deputy-run/deputy/telemetry"

// Attribute keys: the GenAI conventions' (development status), then
// deputy's own.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyAgentName     = attribute.Key("gen_ai.agent.name")
	keyAgentID       = attribute.Key("gen_ai.agent.id")
	keyConversation  = attribute.Key("gen_ai.conversation.id")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	keyCacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	keyCacheCreation = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	keyFinish        = attribute.Key("gen_ai.response.finish_reasons")
	keyToolName      = attribute.Key("gen_ai.tool.name")
	keyToolCallID    = attribute.Key("gen_ai.tool.call.id")
	keyToolType      = attribute.Key("gen_ai.tool.type")
	keyToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	keyToolResult    = attribute.Key("gen_ai.tool.call.result")
	keyInput         = attribute.Key("gen_ai.input.messages")
	keyOutput        = attribute.Key("gen_ai.output.messages")
	keyErrorType     = attribute.Key("error.type")
	keyHTTPStatus    = attribute.Key("http.response.status_code")

	keyInstance    = attribute.Key("deputy.instance.id")
	keyParent      = attribute.Key("deputy.parent.id")
	keyRoot        = attribute.Key("deputy.root.id")
	keyDepth       = attribute.Key("deputy.depth")
	keyMode        = attribute.Key("deputy.mode")
	keyModelSpec   = attribute.Key("deputy.model")
	keyTurn        = attribute.Key("deputy.turn")
	keyTurns       = attribute.Key("deputy.turns")
	keyToolCalls   = attribute.Key("deputy.tool_calls")
	keyState       = attribute.Key("deputy.state")
	keyStop        = attribute.Key("deputy.stop_reason")
	keyPurpose     = attribute.Key("deputy.purpose")
	keySubagent    = attribute.Key("deputy.subagent.id")
	keySubType     = attribute.Key("deputy.subagent.type")
	keyWaiting     = attribute.Key("deputy.waiting_for")
	keyAttempt     = attribute.Key("deputy.attempt.n")
	keyReason      = attribute.Key("deputy.attempt.reason")
	keyRetry       = attribute.Key("deputy.attempt.retry")
	keyRequestID   = attribute.Key("deputy.attempt.request_id")
	keyAttemptErr  = attribute.Key("deputy.attempt.error")
	keyInterrupted = attribute.Key("deputy.interrupted")
)

// Options configure a Tracer (New), and for Setup also whether and where
// spans are exported.
type Options struct {
	// Enabled turns export on without OTEL_EXPORTER_OTLP_ENDPOINT
	// (deputy.yaml telemetry.enabled); Setup only.
	Enabled bool
	// Endpoint is the OTLP/HTTP collector's base URL (deputy.yaml
	// telemetry.endpoint; /v1/traces is added to a URL without that path);
	// the OTEL_EXPORTER_OTLP_*ENDPOINT variables win over it. Setup only.
	Endpoint string
	// Content records message content: tasks, prompts, answers, tool
	// arguments and results. Off by default: they may hold secrets. Setup
	// also turns it on for OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
	Content bool
	// Clock stamps every span's start and end (clock.Real when nil).
	Clock clock.Clock
	// Lookup tells what events do not: a root's model spec and task, and the
	// root of an instance whose parent this tracer has not seen (a child's
	// later run, in a tree rebuilt from the store). Called once per
	// instance run at most, from the goroutine of its first event. nil:
	// roots' model calls are named after the attempts providers report, and
	// such a child's trace is derived from its parent's id.
	Lookup func(id string) (Known, bool)
	// OnError hears export failures, with every header value and URL
	// credential removed; nil: they are written to stderr. Setup only.
	OnError func(error)
}

// Known is what a Lookup knows of an instance (as the store records it).
type Known struct {
	Root  string // the tree's root id
	Model string // provider:model
	Task  string // recorded only with Options.Content
}

// Tracer turns agent events into spans. It is safe for concurrent use, as
// agent.Runner's OnEvent must be. The zero value and nil are disabled.
type Tracer struct {
	tracer  trace.Tracer // nil: disabled
	clock   clock.Clock
	content bool
	lookup  func(string) (Known, bool)

	mu     sync.RWMutex
	insts  map[string]*inst // instances with an open invoke_agent span
	closed bool
}

// New returns a Tracer whose spans go to tp. For deterministic trace ids tp
// needs IDGenerator (see TraceID). A nil tp gives a disabled Tracer.
func New(tp trace.TracerProvider, o Options) *Tracer {
	if tp == nil {
		return &Tracer{}
	}
	c := o.Clock
	if c == nil {
		c = clock.Real
	}
	return &Tracer{tracer: tp.Tracer(scope), clock: c, content: o.Content, lookup: o.Lookup,
		insts: map[string]*inst{}}
}

// Enabled reports whether the tracer records anything.
func (t *Tracer) Enabled() bool { return t != nil && t.tracer != nil }

// Hook returns an event callback feeding both next and the tracer; next
// itself when the tracer is disabled. next may be nil.
func (t *Tracer) Hook(next func(agent.Event)) func(agent.Event) {
	switch {
	case !t.Enabled():
		return next
	case next == nil:
		return t.Event
	}
	return func(e agent.Event) {
		next(e)
		t.Event(e)
	}
}

// inst is one run of an instance: its invoke_agent span and what is open
// under it.
type inst struct {
	mu                     sync.Mutex
	id, parent, root, name string
	depth                  int
	provider, model, spec  string
	span                   trace.Span
	ctx                    context.Context // holds span: the parent of its chat and tool spans
	done                   bool
	turn                   int

	chat     trace.Span // the open model call; nil when none
	chatWait bool       // content: the response came, its message is next
	chatEnd  time.Time
	finish   llm.StopReason
	reason   string // the last failed attempt's

	calls []*call // open tool calls, in call order

	finished bool
	stop     loop.StopReason
	usage    llm.Usage
	errText  string
	// asked: the current turn's ask_parent call succeeded, so a run that
	// stops to wait after it is asking, not paused (agent.Asked).
	asked bool

	pending []llm.Message // content: what the next model call adds
	answer  string        // content: the last assistant text
}

// call is an open execute_tool span.
type call struct {
	span    trace.Span
	id      string
	asks    bool // an ask_parent call
	spawns  spawnKind
	tasks   []string // the tasks a spawning call names
	claimed int
}

type spawnKind uint8

const (
	spawnNone spawnKind = iota
	spawnOne            // spawn_subagent (or its alias task): one child
	spawnMany           // fan_out: a child per task, and merge children
)

// Event records e. It is agent.Runner.OnEvent's shape.
func (t *Tracer) Event(e agent.Event) {
	if !t.Enabled() {
		return
	}
	switch e.Kind {
	case agent.EventStep:
		switch e.Loop.Kind {
		case loop.EventModelDelta:
			return // the response's span has the totals
		case loop.EventMessage:
			if !t.content {
				return
			}
		}
		t.step(e)
	case agent.EventCreated, agent.EventSpawned:
		t.begin(e)
	case agent.EventQueued:
		if in := t.get(e.Instance); in != nil {
			in.mu.Lock()
			if !in.done {
				in.span.AddEvent("deputy.queued", trace.WithTimestamp(t.clock.Now()),
					trace.WithAttributes(keyWaiting.String(e.Waiting)))
			}
			in.mu.Unlock()
		}
	case agent.EventEnded:
		t.ended(e)
	}
}

func (t *Tracer) get(id string) *inst {
	t.mu.RLock()
	in := t.insts[id]
	t.mu.RUnlock()
	return in
}

// remove forgets an instance whose spans have all ended. Called without
// the instance's lock held: begin takes the tracer's lock, then a parent's.
func (t *Tracer) remove(in *inst) {
	t.mu.Lock()
	if t.insts[in.id] == in {
		delete(t.insts, in.id)
	}
	t.mu.Unlock()
}

// begin opens an instance's invoke_agent span: at EventCreated for a child
// (so the time it waited for a slot is in it), at EventSpawned for a root
// or a child's later run.
func (t *Tracer) begin(e agent.Event) {
	t.mu.RLock()
	closed, in, parent := t.closed, t.insts[e.Instance], t.insts[e.Parent]
	t.mu.RUnlock()
	if closed {
		return
	}
	if in != nil {
		if e.Kind == agent.EventSpawned {
			in.mu.Lock()
			if !in.done {
				in.span.AddEvent("deputy.started", trace.WithTimestamp(t.clock.Now()))
			}
			in.mu.Unlock()
		}
		return
	}
	var known *Known
	if parent == nil && t.lookup != nil {
		if k, ok := t.lookup(e.Instance); ok {
			known = &k
		}
	}
	in = t.newInst(e, known)
	ctx := t.spanParent(in, parent, e, known)
	in.span = t.start(ctx, "invoke_agent "+in.name, kindInternal, t.agentAttrs(in, e.Spawned, known))
	in.ctx = trace.ContextWithSpan(context.Background(), in.span)
	t.register(in)
}

// newInst is the record of an instance run not traced before, named after
// its type, on the model its spawn (or else the lookup) names. With
// content, the message that starts it (the task, or a fork's
// instructions) is pending: the first model call's input carries it.
func (t *Tracer) newInst(e agent.Event, known *Known) *inst {
	in := &inst{id: e.Instance, parent: e.Parent, name: cmp.Or(e.Type, "agent"), depth: e.Depth}
	switch sp := e.Spawned; {
	case sp != nil:
		in.setModel(sp.Model)
		if n := len(sp.Messages); t.content && n > 0 {
			in.pending = append(in.pending, sp.Messages[n-1])
		}
	case known != nil:
		in.setModel(known.Model)
	}
	return in
}

// spanParent sets in's root and returns the context its span starts in.
// Under a traced parent, that is the parent's tool call that spawned it
// (which gets a deputy.subagent event) when the parent claims one, else
// the parent's own span. Without one, the span starts a trace named after
// the root (TraceID), so a tree's runs in several processes share a trace.
func (t *Tracer) spanParent(in, parent *inst, e agent.Event, known *Known) context.Context {
	if parent == nil {
		switch {
		case e.Parent == "":
			in.root = e.Instance
		case known != nil && known.Root != "":
			in.root = known.Root
		default:
			in.root = e.Parent // the root if the parent is one (depth 1)
		}
		return withTrace(context.Background(), TraceID(in.root))
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	in.root = parent.root
	ps := parent.span
	if c := parent.claim(e.Spawned); c != nil {
		ps = c.span
		c.span.AddEvent("deputy.subagent", trace.WithTimestamp(t.clock.Now()),
			trace.WithAttributes(keySubagent.String(e.Instance), keySubType.String(e.Type)))
		if c.spawns == spawnOne {
			c.span.SetAttributes(keySubagent.String(e.Instance))
		}
	}
	return trace.ContextWithSpan(context.Background(), ps)
}

// agentAttrs are an invoke_agent span's attributes: the instance and its
// place in the tree, its model and mode and, with content, its task as
// the span's input.
func (t *Tracer) agentAttrs(in *inst, sp *agent.Spawned, known *Known) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs, keyOperation.String("invoke_agent"), keyAgentName.String(in.name),
		keyAgentID.String(in.id), keyConversation.String(in.id), keyInstance.String(in.id),
		keyRoot.String(in.root), keyDepth.Int(in.depth))
	if in.parent != "" {
		attrs = append(attrs, keyParent.String(in.parent))
	}
	attrs = append(attrs, in.modelAttrs()...)
	if sp != nil && sp.Mode != "" {
		attrs = append(attrs, keyMode.String(string(sp.Mode)))
	}
	if t.content {
		switch {
		case sp != nil:
			attrs = append(attrs, keyInput.String(textJSON(llm.User, sp.Task)))
		case known != nil && known.Task != "":
			attrs = append(attrs, keyInput.String(textJSON(llm.User, known.Task)))
		}
	}
	return attrs
}

// register lists a begun instance for the events that follow. Its span
// started without the tracer's lock held, so the tracer may have closed
// meanwhile, or another event begun the same instance at once: then this
// one's span ends there, marked interrupted (the one listed first stays).
func (t *Tracer) register(in *inst) {
	t.mu.Lock()
	if t.closed || t.insts[in.id] != nil {
		t.mu.Unlock()
		in.span.SetAttributes(keyInterrupted.Bool(true))
		in.span.End(trace.WithTimestamp(t.clock.Now()))
		return
	}
	t.insts[in.id] = in
	t.mu.Unlock()
}

// Span kinds as start options, made once: an option is an interface
// value, and boxing it per span costs an allocation.
var (
	kindInternal = trace.WithSpanKind(trace.SpanKindInternal)
	kindClient   = trace.WithSpanKind(trace.SpanKindClient)
)

func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanStartOption, attrs []attribute.KeyValue) trace.Span {
	_, s := t.tracer.Start(ctx, name, kind, trace.WithTimestamp(t.clock.Now()), trace.WithAttributes(attrs...))
	return s
}

// setModel takes a provider:model spec apart: the provider names
// gen_ai.provider.name, the rest gen_ai.request.model. openai-responses is
// OpenAI on its other wire: the conventions name the provider, not the API
// (deputy.model_spec keeps the whole spec).
func (in *inst) setModel(spec string) {
	if spec == "" {
		return
	}
	in.spec = spec
	if p, m, ok := strings.Cut(spec, ":"); ok {
		if p == "openai-responses" {
			p = "openai"
		}
		in.provider, in.model = p, m
	} else {
		in.provider, in.model = spec, spec // "fake": deputy's scripted model
	}
}

func (in *inst) modelAttrs() []attribute.KeyValue {
	if in.spec == "" && in.provider == "" {
		return nil
	}
	return []attribute.KeyValue{keyProvider.String(in.provider), keyRequestModel.String(in.model),
		keyModelSpec.String(in.spec)}
}

// claim finds the parent's open spawn call a new child belongs to, or nil:
// a spawn_subagent call naming the child's task, else the one fan_out call
// open (or the one whose task ends the child's: a fan-out task's text is
// its context and dependencies' reports, then the task), else the only
// spawn call not yet claimed. The events do not say which call listed a
// child; these rules find it whenever the calls can be told apart.
func (in *inst) claim(sp *agent.Spawned) *call {
	if in.done {
		return nil
	}
	task := ""
	if sp != nil {
		task = sp.Task
	}
	var one, many []*call
	for _, c := range in.calls {
		switch c.spawns {
		case spawnOne:
			if c.claimed > 0 {
				continue
			}
			if len(c.tasks) == 1 && task != "" && c.tasks[0] == task {
				c.claimed++
				return c
			}
			one = append(one, c)
		case spawnMany:
			many = append(many, c)
		}
	}
	if len(many) == 1 {
		many[0].claimed++
		return many[0]
	}
	for _, c := range many {
		for _, ft := range c.tasks {
			if ft != "" && strings.HasSuffix(task, ft) {
				c.claimed++
				return c
			}
		}
	}
	if len(one) == 1 && len(many) == 0 {
		one[0].claimed++
		return one[0]
	}
	return nil
}

// step records one loop event of an instance.
func (t *Tracer) step(e agent.Event) {
	in := t.get(e.Instance)
	if in == nil {
		return
	}
	in.mu.Lock()
	gone := in.step(t, &e.Loop)
	in.mu.Unlock()
	if gone {
		t.remove(in)
	}
}

// step records le; it reports whether the instance's spans have all ended
// (a run that stopped to wait: a child's has no EventEnded).
func (in *inst) step(t *Tracer, le *loop.Event) bool {
	if in.done {
		return false
	}
	now := t.clock.Now()
	if in.chatWait && (le.Kind != loop.EventMessage || le.Message.Role != llm.Assistant) {
		in.endChat(in.chatEnd) // its message did not come
	}
	switch le.Kind {
	case loop.EventTurnStarted:
		in.turn, in.asked = le.Turn, false
		in.startChat(t, now)
	case loop.EventCompaction:
		if in.chat != nil {
			// The call made so far in this turn was the summary.
			in.chat.SetAttributes(append(usageAttrs(le.Usage), keyPurpose.String("compact"))...)
			in.endChat(now)
		}
		in.startChat(t, now)
	case loop.EventModelAttempt:
		in.attempt(&le.Attempt, now)
	case loop.EventModelResponse:
		if in.chat == nil {
			in.startChat(t, now) // a response without turn_started: keep its usage
		}
		in.chat.SetAttributes(append(usageAttrs(le.Usage), keyFinish.StringSlice([]string{string(le.ModelStop)}))...)
		if t.content {
			in.chatWait, in.chatEnd, in.finish = true, now, le.ModelStop
		} else {
			in.endChat(now)
		}
	case loop.EventMessage: // content only
		m := le.Message
		if m.Role == llm.Assistant {
			if s := m.Text(); s != "" {
				in.answer = s
			}
			if in.chatWait {
				in.chat.SetAttributes(keyOutput.String(messagesJSON([]llm.Message{m}, string(in.finish))))
				in.endChat(in.chatEnd)
			}
		} else {
			in.pending = append(in.pending, m)
		}
	case loop.EventToolCall:
		in.toolCall(t, &le.Block, now)
	case loop.EventToolResult:
		in.toolResult(t, &le.Block, now)
	case loop.EventWrapUp:
		in.span.AddEvent("deputy.wrap_up", trace.WithTimestamp(now))
	case loop.EventFinished:
		in.finished, in.stop, in.usage, in.turn = true, le.Stop, le.Usage, le.Turn
		if le.Err != nil {
			in.errText = le.Err.Error()
		}
		if in.chat != nil {
			// The model call did not answer: it failed, or was cut.
			typ := cmp.Or(in.reason, string(le.Stop))
			desc := "interrupted: " + string(le.Stop)
			if le.Err != nil {
				desc = le.Err.Error()
			}
			failSpan(in.chat, typ, desc)
			in.endChat(now)
		}
		in.endCalls(now, "not finished: the run stopped ("+string(le.Stop)+")")
		if le.Stop == loop.StopSuspended {
			// It waits for an answer or a resume; its next run is a span of
			// its own. A child that waits emits no EventEnded.
			state, _ := agent.StateOf(le.Stop, in.asked, nil)
			in.end(t, now, state, in.usage, le.Turn, -1, string(le.Stop), "", "")
			return true
		}
	}
	return false
}

func (in *inst) startChat(t *Tracer, now time.Time) {
	if in.chat != nil {
		in.endChat(now)
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, keyOperation.String("chat"))
	attrs = append(attrs, in.modelAttrs()...)
	attrs = append(attrs, keyAgentName.String(in.name), keyAgentID.String(in.id), keyConversation.String(in.id),
		keyInstance.String(in.id), keyTurn.Int(in.turn))
	if t.content && len(in.pending) > 0 {
		attrs = append(attrs, keyInput.String(messagesJSON(in.pending, "")))
		in.pending = in.pending[:0]
	}
	name := "chat"
	if in.model != "" {
		name += " " + in.model
	}
	in.chat = t.start(in.ctx, name, kindClient, attrs)
	in.reason = ""
}

func (in *inst) endChat(at time.Time) {
	if in.chat != nil {
		in.chat.End(trace.WithTimestamp(at))
	}
	in.chat, in.chatWait = nil, false
}

// attempt notes one HTTP request of the open model call; the provider's
// own names for itself and the model win over the spec's.
func (in *inst) attempt(a *llm.Attempt, now time.Time) {
	if in.chat == nil {
		return
	}
	if a.Provider != "" && a.Provider != in.provider {
		in.provider = a.Provider
		in.chat.SetAttributes(keyProvider.String(a.Provider))
	}
	if a.Model != "" && a.Model != in.model {
		in.model = a.Model
		in.chat.SetName("chat " + a.Model)
		in.chat.SetAttributes(keyRequestModel.String(a.Model))
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, keyAttempt.Int(a.N), keyRetry.Bool(a.Retry))
	if a.Status > 0 {
		attrs = append(attrs, keyHTTPStatus.Int(a.Status))
	}
	if a.RequestID != "" {
		attrs = append(attrs, keyRequestID.String(a.RequestID))
	}
	if !a.OK() {
		in.reason = cmp.Or(a.Reason, "error")
		attrs = append(attrs, keyReason.String(in.reason), keyAttemptErr.String(agentdef.OneLine(a.Error, 300)))
	}
	in.chat.AddEvent("deputy.attempt", trace.WithTimestamp(now), trace.WithAttributes(attrs...))
}

func (in *inst) toolCall(t *Tracer, b *llm.Block, now time.Time) {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, keyOperation.String("execute_tool"), keyToolName.String(b.Name),
		keyToolCallID.String(b.ID), keyToolType.String("function"), keyAgentName.String(in.name),
		keyAgentID.String(in.id), keyInstance.String(in.id), keyTurn.Int(in.turn))
	if t.content {
		attrs = append(attrs, keyToolArgs.String(b.Arguments()))
	}
	c := &call{id: b.ID, asks: b.Name == agentdef.AskTool}
	c.span = t.start(in.ctx, "execute_tool "+b.Name, kindInternal, attrs)
	switch b.Name {
	case agentdef.SpawnTool, "task":
		var in struct {
			Task string `json:"task"`
		}
		if json.Unmarshal(b.Input, &in) == nil {
			c.spawns, c.tasks = spawnOne, []string{in.Task}
		}
	case agentdef.FanOutTool:
		var in struct {
			Tasks []struct {
				Task string `json:"task"`
			} `json:"tasks"`
		}
		c.spawns = spawnMany
		if json.Unmarshal(b.Input, &in) == nil {
			for _, ft := range in.Tasks {
				c.tasks = append(c.tasks, ft.Task)
			}
		}
	}
	in.calls = append(in.calls, c)
}

func (in *inst) toolResult(t *Tracer, b *llm.Block, now time.Time) {
	for i, c := range in.calls {
		if c.id != b.ToolUseID {
			continue
		}
		in.asked = in.asked || c.asks && !b.IsError
		if t.content {
			c.span.SetAttributes(keyToolResult.String(b.Text))
		}
		if b.IsError {
			// The error's text is the tool's output: content.
			desc := "the tool returned an error"
			if t.content {
				desc = agentdef.OneLine(b.Text, 300)
			}
			failSpan(c.span, "tool_error", desc)
		}
		c.span.End(trace.WithTimestamp(now))
		in.calls = append(in.calls[:i], in.calls[i+1:]...)
		return
	}
}

// endCalls ends every open tool call as failed with why.
func (in *inst) endCalls(now time.Time, why string) {
	for _, c := range in.calls {
		failSpan(c.span, "interrupted", why)
		c.span.End(trace.WithTimestamp(now))
	}
	in.calls = nil
}

// ended closes an instance's spans as it ends.
func (t *Tracer) ended(e agent.Event) {
	in := t.get(e.Instance)
	if in == nil {
		return
	}
	now := t.clock.Now()
	in.mu.Lock()
	if in.done {
		in.mu.Unlock()
		return
	}
	var report string
	switch f, r := e.Final, e.Relay; {
	case f != nil:
		if r != nil {
			report = r.Report
		}
		in.end(t, now, f.State, f.Usage, f.Turns, f.ToolCalls, f.StopReason, cmp.Or(f.Error, errOf(r)), report)
	case r != nil:
		in.end(t, now, r.State, r.Usage, r.Turns, r.ToolCalls, r.StopReason, r.Error, r.Report)
	default: // a root: how its loop finished
		in.end(t, now, rootState(in), in.usage, in.turn, -1, string(in.stop), in.errText, in.answer)
	}
	in.mu.Unlock()
	t.remove(in)
}

func errOf(r *agent.Relay) string {
	if r == nil {
		return ""
	}
	return r.Error
}

// rootState is the state a root's run ended in, from its loop's end, as
// agent decides it for instances (agent.StateOf). A root whose loop never
// finished failed.
func rootState(in *inst) instance.State {
	var err error
	if in.errText != "" || in.stop == "" && !in.finished {
		err = errors.New(cmp.Or(in.errText, "its loop did not finish"))
	}
	state, _ := agent.StateOf(in.stop, in.asked, err)
	return state
}

// end closes what is open under the instance, then its own span. calls < 0:
// unknown.
func (in *inst) end(t *Tracer, now time.Time, state instance.State, u llm.Usage, turns, calls int, stop, errText, report string) {
	in.endChat(now)
	in.endCalls(now, "not finished: the instance ended")
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, keyState.String(string(state)), keyTurns.Int(turns))
	attrs = append(attrs, usageAttrs(u)...)
	if stop != "" {
		attrs = append(attrs, keyStop.String(stop))
	}
	if calls >= 0 {
		attrs = append(attrs, keyToolCalls.Int(calls))
	}
	if t.content && report != "" {
		attrs = append(attrs, keyOutput.String(textJSON(llm.Assistant, report)))
	}
	in.span.SetAttributes(attrs...)
	switch state {
	case instance.Failed, instance.TimedOut, instance.Cancelled:
		failSpan(in.span, string(state), cmp.Or(errText, string(state)))
	}
	in.span.End(trace.WithTimestamp(now))
	in.done = true
	in.pending = nil
}

// interrupt ends the spans of an instance still running when the tracer
// closes (the process stops; a durable instance resumes in the next).
func (in *inst) interrupt(now time.Time) {
	if in.chat != nil {
		failSpan(in.chat, "interrupted", "interrupted: the process closed")
	}
	in.endChat(now)
	in.endCalls(now, "interrupted: the process closed")
	in.span.SetAttributes(keyInterrupted.Bool(true))
	in.span.End(trace.WithTimestamp(now))
	in.done = true
}

// Close ends the spans of every instance still open, marked interrupted,
// and ignores later events. Setup's shutdown calls it before flushing.
func (t *Tracer) Close() {
	if !t.Enabled() {
		return
	}
	t.mu.Lock()
	t.closed = true
	open := t.insts
	t.insts = map[string]*inst{}
	t.mu.Unlock()
	now := t.clock.Now()
	for _, in := range open {
		in.mu.Lock()
		if !in.done {
			in.interrupt(now)
		}
		in.mu.Unlock()
	}
}

// usageAttrs follows the conventions: input_tokens is the whole prompt,
// cached tokens included (deputy's InputTokens is the uncached part).
func usageAttrs(u llm.Usage) []attribute.KeyValue {
	return []attribute.KeyValue{ // cap 5: room for one more without a copy
		keyInputTokens.Int64(u.Prompt()), keyOutputTokens.Int64(u.OutputTokens),
		keyCacheRead.Int64(u.CacheReadTokens), keyCacheCreation.Int64(u.CacheWriteTokens), {}}[:4]
}

func failSpan(s trace.Span, typ, desc string) {
	s.SetAttributes(keyErrorType.String(typ))
	s.SetStatus(codes.Error, agentdef.OneLine(desc, 300))
}
