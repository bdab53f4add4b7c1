package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/tool"
)

// Defaults of a Runner.
const (
	DefaultMaxParallel = 8
	DefaultMaxDepth    = 1
	// SoftTimeoutShare is when, as a share of a child's wall-time budget,
	// it is told to wrap up.
	SoftTimeoutShare = 0.8
)

// DelegationGuidance ends the system prompt of every instance offered
// spawn_subagent: how much to delegate. Spawning costs a context, a
// prompt and a report; it pays for context isolation and parallel work,
// so the effort scales with the breadth of the task, not with roles.
const DelegationGuidance = `Delegating: match the number of subagents to the task. A simple lookup or a ` +
	`small change: none, do it yourself. A comparison of a few things: one subagent per thing, in parallel. ` +
	`Broad research or many independent parts: many, in one fan_out. Spawn for two reasons only: to keep ` +
	`bulky reading out of your context, and to do independent work at the same time. Never spawn to play ` +
	`a role (a "manager" or a "tester" that does what you could do); a reviewer is worth it because it ` +
	`starts without your reasoning.`

// Runner runs a root agent that can delegate to subagents. It keeps the
// instances of a run in memory, for as long as the run; the durable
// runtime persists them and builds on the same pieces. A Runner is
// configuration: one may serve many runs at once.
type Runner struct {
	// Catalog holds the types a parent can spawn; nil means the built-ins.
	Catalog *agentdef.Catalog
	// Skills are the skills that exist; a child sees only those its
	// definition grants.
	Skills map[string]*agentdef.Skill
	// Config maps tiers to models and holds prices (laid over the
	// built-in ones, see Prices); nil means none, so every tier inherits
	// the parent's model and only the built-in prices apply.
	Config *agentdef.Config
	// Models opens the provider:model a tier or definition names. nil: a
	// child that names a model fails to start with an error.
	Models func(spec string) (llm.Model, error)
	Clock  clock.Clock // clock.Real when nil
	// MaxParallel is how many spawns of one parent run at once (default
	// 8); the others wait for a slot.
	MaxParallel int
	// MaxDepth is how deep the tree may grow: an instance at depth d may
	// spawn while d < MaxDepth. 0 means the default, 1 (only the root
	// spawns); negative means no spawning at all.
	MaxDepth int
	// OnEvent receives every instance's events. Children run concurrently,
	// so it is called from several goroutines and must be safe for that.
	OnEvent func(Event)
	// NewID names instances; random ids when nil.
	NewID func() string
	// Steps, when set, gives the root's run its step runner (the durable
	// engine's checkpointed steps).
	Steps loop.Steps
	// Children, when set, runs each child's work with the step runner it
	// provides: the durable engine runs every child as a workflow of its
	// own, so a crash mid-child resumes the child from its last step and
	// the replayed spawn call reattaches to it. Child ids are then derived
	// from the spawn call, so a replay names the same child. nil: children
	// run with loop.Direct inside their parent's spawn call.
	Children ChildRunner
	// Questions, when set, offers the root ask_parent (its parent is the
	// person who gave the task) and takes its questions. Asking stops the
	// run: the root is then asking (instance.Asking), and the answer
	// starts its next run.
	Questions Questions
	// Manager, when set with Children, lets parents start background
	// children (spawn_subagent background: true) and offers them the
	// subagent_* tools to wait for, steer, pause, resume, cancel and
	// answer their children. With Questions it also lets children ask
	// (ask_parent), those whose definitions allow it (see AskParent).
	Manager Manager
	// AskParent offers ask_parent to every instance that can be answered
	// (a root, with Questions; a child, with Questions and Manager)
	// whatever its definition's allowlist says; its deny list still
	// removes it. Without it, a type asks only when its Tools is absent
	// or lists ask_parent (agentdef.Definition.Tools): an allowlist means
	// what it says.
	AskParent bool
	// Stream is every instance's loop.Config.Stream, root and children,
	// fork or isolated: the model is called with a stream callback, and
	// its deltas reach OnEvent. Without it a provider built NonStreaming
	// makes the plain, non-streamed call.
	Stream bool
	// Permissions, when set, decide every call of the tree (issue 20): the
	// root's policy, each child's narrowed from its parent's (a child
	// whose type asks for a wider mode is refused at spawn). Calls its
	// policy asks about go to Approver, else are held through Approvals,
	// else suspend the instance asking. nil: nothing is enforced.
	Permissions *Permissions
	// Approver, when set, answers approvals inline (see Approver).
	Approver Approver
	// Approvals, when set (and no Approver), records held calls durably.
	Approvals Approvals
	// Fencer, when set, builds the fences (sandbox, container, worktree)
	// of children whose definitions ask for one. nil: such a spawn is
	// refused; a child never runs unfenced.
	Fencer Fencer
	// Hooks, when set, are the Claude Code hooks every instance runs
	// (see Hooks).
	Hooks *Hooks
}

// Task is a root agent's work.
type Task struct {
	// ID names the root instance; NewID's when empty.
	ID   string
	Task string // the user's task, the root's first message
	// Type names the subagent type the root runs as, from the catalog;
	// "" or "root": a plain root (System, Tools and Limits as given). A
	// root of a type is built as spawn builds an isolated child of it
	// (see typedRoot): the type's system prompt and report bound, its
	// skills, its allowlist over Tools, its model (a tier through Config,
	// Model when it inherits), limits, tool choice and spawn rights.
	Type string
	// Definition, when set, is the type itself (a snapshot recorded when
	// the instance started), used instead of the catalog's Type.
	Definition *agentdef.Definition
	System     string
	Model      llm.Model
	// ModelName is sent in requests (the provider's own model name).
	ModelName string
	// ModelSpec names the model as deputy does (provider:model), for
	// prices and the instance list; default ModelName.
	ModelSpec string
	// Tools is what the root holds: what its model is offered (see Offer)
	// and what its children draw from, each as its definition's allowlist
	// filters them.
	Tools *tool.Set
	// Offer, when set, names exactly the tools the root's model is
	// offered, out of Tools and deputy's own (spawn_subagent, fan_out, the
	// subagent_* tools, skill, ask_parent, and task, spawn_subagent's
	// hidden other name, only when listed with it). Its children still
	// draw from all of Tools: a root offered only spawn_subagent, holding
	// a hundred tools, delegates each to the children whose types allow
	// it. A name that is neither held nor deputy's is an error of Run,
	// and so is one of deputy's whose condition does not hold here
	// (spawning needs MaxDepth, ask_parent Questions, the subagent_* tools
	// a Manager with Children): a program is never silently given less
	// than it asked for. For a root of a type, Offer narrows what the
	// type's allowlist leaves, and naming a tool the type does not grant
	// is an error too. nil: everything the root can be offered (all of
	// Tools, spawning and the task alias while MaxDepth allows, ask_parent
	// with Questions, the subagent_* tools under a Manager; for a root of
	// a type, what its allowlist grants of those).
	Offer      []string
	Limits     loop.Limits
	Compaction loop.Compaction
	// Budget bounds the whole tree; spent, it stops further spawns and
	// every instance's next turn.
	Budget TreeBudget
	// Spent is what the tree spent in earlier runs (a run after an answer,
	// a resume or a crash), charged to Budget before this run starts.
	Spent TreeBudget
	// Volatile definitions exist for this run only, above every other
	// source; they are checked like files.
	Volatile []*agentdef.Definition
	// Messages, when set, is the transcript the root continues from
	// (a run after a crash or an answer) instead of the task alone.
	Messages []llm.Message
	// Inbox, when set, is the root's loop.Config.Inbox: notes and pause or
	// cancel requests that reach it at its turn boundaries.
	Inbox loop.InboxFunc
	// Hold is the root's loop.Config.Hold (its background children).
	Hold loop.HoldFunc
	// Resume is the root's loop.Config.Resume: a run that continues one
	// suspended on held calls, now decided.
	Resume *loop.Resume
	// Permissions, when set, replace the Runner's for this tree.
	Permissions *Permissions
	// Inherited, when set, is the model the root's children run on when
	// their type inherits one, instead of the root's own: for a root whose
	// model is no provider's (the library's fan-out planner). Such a root
	// has no conversation worth forking, so its children run isolated.
	Inherited *ModelRef
}

// ModelRef is an open model with its names: the one requests carry and
// deputy's provider:model (for prices and the instance list).
type ModelRef struct {
	Model      llm.Model
	Name, Spec string
}

// Outcome is a finished run of a tree.
type Outcome struct {
	Result *loop.Result // the root's run
	// Report is the root's final text: its answer, or, for a root run as a
	// type, that answer within the type's report cap, as a child's is.
	Report string
	// Instances lists the root first, then every child in the order it
	// was spawned. Each is its record as this run kept it: CreatedAt is
	// when the run listed it, Report its report (a child's as its parent
	// read it), Definition and WorkflowID are left to the durable engine.
	Instances []instance.Record
	Usage     llm.Usage // the whole tree's
	// Cost is the tree's cost in USD; CostKnown is false when some
	// instance's model has no price (then Cost covers the priced ones).
	Cost      float64
	CostKnown bool

	transcripts map[string][]llm.Message
}

// Transcript returns an instance's whole transcript, the one its relay's
// id points to: everything the child read and wrote, of which its parent
// saw only the report.
func (o *Outcome) Transcript(id string) ([]llm.Message, bool) {
	m, ok := o.transcripts[id]
	return m, ok
}

// EventKind says what an Event is about.
type EventKind uint8

const (
	// EventQueued: a child waits before starting (Waiting says for what).
	EventQueued EventKind = iota + 1
	// EventSpawned: an instance started (the root too).
	EventSpawned
	// EventStep: a loop event of the instance (Loop).
	EventStep
	// EventEnded: an instance ended (Relay; for the root, its state).
	EventEnded
	// EventCreated: a child was listed, before it waits for a slot and
	// starts (EventSpawned); Spawned describes it, for a store to record.
	EventCreated
	// EventListed: several children were listed at once (a fan-out's
	// tasks that depend on none), announced by the instance that lists
	// them just before each one's own EventCreated. Listed holds those
	// EventCreated, in order, so a store can record them in one write; a
	// consumer that records each EventCreated may ignore it.
	EventListed
)

// Event is something that happened to one instance of a tree.
type Event struct {
	Kind     EventKind
	Instance string
	Parent   string // empty for the root
	Type     string
	Depth    int
	Loop     loop.Event // EventStep
	Relay    *Relay     // EventEnded
	Waiting  string     // EventQueued
	// Spawned describes a child as it is listed (EventCreated) and as it
	// starts (EventSpawned); nil for the root.
	Spawned *Spawned
	// Final is a child's record as it ended (EventEnded): its own usage
	// and cost, where the relay's cover its subtree.
	Final *instance.Record
	// Hook is what an event's hooks did (EventHook).
	Hook *HookReport
	// Listed are the EventCreated of children listed together
	// (EventListed).
	Listed []Event
}

// Spawned is what a child starts with.
type Spawned struct {
	Definition *agentdef.Definition
	Task       string
	Mode       agentdef.Mode
	Model      string        // provider:model
	Messages   []llm.Message // its first transcript (the task, or a fork of its parent's)
}

// spawned is what n starts with (Event.Spawned), msgs its first messages.
func (n *node) spawned(msgs []llm.Message) *Spawned {
	return &Spawned{Definition: n.def, Task: n.inst.Task, Mode: agentdef.Mode(n.inst.Mode), Model: n.inst.Model, Messages: msgs}
}

// Run runs t's root agent, with a spawn tool while the depth allows, until
// it ends, and returns the whole tree. The error is the root run's (see
// loop.Run); a child's failure is a result its parent saw, not an error.
func (r *Runner) Run(ctx context.Context, t Task) (*Outcome, error) {
	tr, root, err := r.rootNode(t)
	if err != nil {
		return nil, err
	}
	// A root run as a type gets its type's MCP servers, as a spawned
	// child of the type would, for this run.
	if err := tr.startMCP(ctx, root); err != nil {
		return nil, err
	}
	defer tr.stopMCP(root)
	msgs := t.Messages
	if len(msgs) == 0 {
		msgs = []llm.Message{llm.UserText(t.Task)}
	}
	res, runErr := tr.run(ctx, root, msgs)
	state, _ := endState(res, runErr)
	report := res.Answer
	if root.def != nil && state.Terminal() {
		report = tr.report(ctx, root, res) // bounded like a child's
	}
	tr.end(root, res, state, report, runErr)
	tr.emit(root, Event{Kind: EventEnded})
	o := tr.outcome(res)
	o.Report = report
	return o, runErr
}

// rootNode makes the tree of a run and its root's node, ready to run.
func (r *Runner) rootNode(t Task) (*tree, *node, error) {
	if t.Type == "" {
		t.Type = "root"
	}
	if t.ModelSpec == "" {
		t.ModelSpec = t.ModelName
	}
	tr, err := r.newTree(t)
	if err != nil {
		return nil, nil, err
	}
	if def, err := tr.rootType(t); err != nil || def != nil {
		if err != nil {
			return nil, nil, err
		}
		root, err := tr.typedRoot(t, def)
		return tr, root, err
	}
	if !tr.budget.priced(t.ModelSpec) {
		return nil, nil, fmt.Errorf("agent: a USD tree budget needs a price for %s (deputy.yaml prices)", t.ModelSpec)
	}
	offered, err := tr.rootTools(t)
	if err != nil {
		return nil, nil, err
	}
	policy, err := tr.rootPolicy(nil)
	if err != nil {
		return nil, nil, err
	}
	root := tr.add(nil, &node{inst: instance.Record{ID: t.ID, Type: t.Type, Task: t.Task, Model: t.ModelSpec}, avail: t.Tools,
		writes: true, heir: t.Inherited, policy: policy}) // its writing children take turns under it
	root.cfg = loop.Config{
		Model:      t.Model,
		ModelName:  t.ModelName,
		System:     withGuidance(t.System, offered),
		Tools:      offered,
		Limits:     rootLimits(t),
		Compaction: t.Compaction,
		Clock:      tr.clock,
		Budget:     tr.loopBudget(t.ModelSpec),
		Steps:      r.Steps,
		Stream:     r.Stream,
		Inbox:      t.Inbox,
		Hold:       t.Hold,
		Resume:     t.Resume,
	}
	return tr, root, nil
}

// rootLimits are a root's loop limits. A planner root's answer is its
// fan_out's result, which deputy.WaitFanOut decodes: cut to the tool
// output limit (50,000 characters, a few hundred tasks' results) it would
// no longer decode, so unless the task sets one the planner's is lifted.
// No model reads it: the planner only echoes it.
func rootLimits(t Task) loop.Limits {
	l := t.Limits
	if _, ok := t.Model.(Planner); ok && l.ToolOutputChars == 0 {
		l.ToolOutputChars = math.MaxInt32
	}
	return l
}

// tree is one run of a Runner: its instances and what they share.
type tree struct {
	r        *Runner
	catalog  *agentdef.Catalog
	clock    clock.Clock
	maxPar   int
	maxDepth int
	budget   *treeBudget // nil: no tree budget
	// prices are r.Prices(), made once per tree: every instance's end is
	// charged by them, and making them lays deputy.yaml over the built-ins.
	prices cost.Table
	// own is deputy's tools (agentdef.RuntimeTools, the subagent_* ones
	// only when managed), their schemas compiled once per tree: each
	// instance is offered its share of them (pick).
	own     *tool.Set
	managed bool         // a Manager with Children: background children and the subagent_* tools
	perms   *Permissions // nil: no policy is enforced

	mu    sync.Mutex
	nodes []*node
}

// node is an instance while it runs.
type node struct {
	inst   instance.Record // guarded by tree.mu once the instance is listed
	parent *node
	start  time.Time
	cfg    loop.Config // as the instance runs: what a fork child repeats
	// avail is the tools the instance may use, without spawn and skill:
	// what a child with no allowlist inherits.
	avail  *tool.Set
	skills []*agentdef.Skill
	def    *agentdef.Definition // nil for the root
	// heir is what its children that inherit run on when that is not its
	// own model (Task.Inherited); nil otherwise.
	heir  *ModelRef
	fence *Fence // while it runs in one (Fencer)
	sub   string // a fan-out task's id, "" for a spawn
	// order places the instance in the list: its parent's order, then
	// the turn and the index of the spawn call, so children list in the
	// order their parent asked for them, under it, however they ran.
	order      []int
	transcript []llm.Message // set when it ends
	// below is what its descendants spent, added as each ends, so a
	// relay reports what the whole delegated task cost.
	below     llm.Usage
	belowCost float64
	belowOK   bool          // every descendant was priced
	sem       chan struct{} // slots for its children running at once
	// writes is true when the instance can change the workspace. Writing
	// children take turns on their nearest writing ancestor's kidsWrite
	// token, so at most one branch of the tree writes at a time.
	writes    bool
	kidsWrite chan struct{}
	// policy decides its calls (Runner.Permissions); nil: none enforced.
	policy *permission.Policy
}

func (r *Runner) newTree(t Task) (*tree, error) {
	if t.Model == nil {
		return nil, errors.New("agent: Task.Model is nil")
	}
	cat := r.Catalog
	if cat == nil {
		cat, _ = agentdef.Load(agentdef.LoadOptions{})
	}
	if len(t.Volatile) > 0 {
		var err error
		if cat, err = cat.With(t.Volatile...); err != nil {
			return nil, err
		}
	}
	tr := &tree{r: r, catalog: cat, clock: r.Clock, maxPar: r.MaxParallel, maxDepth: r.MaxDepth, perms: r.Permissions}
	if t.Permissions != nil {
		tr.perms = t.Permissions
	}
	if tr.clock == nil {
		tr.clock = clock.Real
	}
	if tr.maxPar <= 0 {
		tr.maxPar = DefaultMaxParallel
	}
	switch {
	case tr.maxDepth == 0:
		tr.maxDepth = DefaultMaxDepth
	case tr.maxDepth < 0:
		tr.maxDepth = 0
	}
	tr.prices = r.Prices()
	if t.Budget.Tokens > 0 || t.Budget.USD > 0 {
		tr.budget = &treeBudget{limit: t.Budget, prices: tr.prices, tokens: t.Spent.Tokens, usd: t.Spent.USD}
	}
	tr.managed = r.Manager != nil && r.Children != nil
	own := []tool.Tool{&spawnTool{tree: tr}, fanOutTool{tree: tr}}
	if tr.managed {
		own = append(own, manageTools(tr)...)
	}
	var err error
	if tr.own, err = tool.NewSet(append(own, skillTool{}, askTool{tree: tr})...); err != nil {
		return nil, err
	}
	return tr, nil
}

// add lists a new instance under parent (nil for the root).
func (tr *tree) add(parent *node, n *node) *node {
	n.parent, n.start, n.belowOK = parent, tr.clock.Now(), true
	n.sem, n.kidsWrite = make(chan struct{}, tr.maxPar), make(chan struct{}, 1)
	if n.inst.ID == "" {
		n.inst.ID = tr.newID()
	}
	n.inst.State, n.inst.Root = instance.Running, n.inst.ID
	n.inst.CreatedAt, n.inst.UpdatedAt = n.start, n.start
	if parent != nil {
		n.inst.Parent, n.inst.Root = parent.inst.ID, parent.inst.Root
		n.inst.Depth = parent.inst.Depth + 1
	}
	tr.mu.Lock()
	tr.nodes = append(tr.nodes, n)
	tr.mu.Unlock()
	return n
}

func (tr *tree) newID() string {
	if tr.r.NewID != nil {
		return tr.r.NewID()
	}
	return NewID()
}

// NewID returns a fresh random instance id, "i-" and 12 hex digits.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "i-" + hex.EncodeToString(b[:])
}

type nodeKey struct{}

// nodeFrom finds the instance a tool call belongs to: every instance's
// run context carries its node, so one spawn tool serves the whole tree.
func nodeFrom(ctx context.Context) *node {
	n, _ := ctx.Value(nodeKey{}).(*node)
	return n
}

// callInput is how deputy's own tools start a call: the calling
// instance, which only a run of the tree puts in the call's context, and
// the call's input, decoded.
func callInput[T any](ctx context.Context, name string, raw json.RawMessage) (*node, T, error) {
	n := nodeFrom(ctx)
	if n == nil {
		var zero T
		return nil, zero, errors.New(name + " runs only inside a deputy agent run")
	}
	in, err := tool.Decode[T](raw)
	return n, in, err
}

// run runs n's loop, forwarding its events and noting the files it writes.
func (tr *tree) run(ctx context.Context, n *node, msgs []llm.Message) (*loop.Result, error) {
	ctx = context.WithValue(ctx, nodeKey{}, n)
	hooks, msgs, early, err := tr.startHooks(ctx, n, msgs)
	if early != nil {
		return early, err
	}
	defer hooks.close()
	ev := Event{Kind: EventSpawned}
	if n.def != nil && n.parent != nil { // a root run as a type is still the root
		ev.Spawned = n.spawned(msgs)
	}
	tr.emit(n, ev)
	cfg := n.cfg
	if n.policy != nil {
		cfg.Gate = tr.gate(n)
	}
	arts := artifactTracker{}
	cfg.OnEvent = func(e loop.Event) {
		if path := arts.observe(e); path != "" {
			tr.mu.Lock()
			n.inst.Artifacts = append(n.inst.Artifacts, path)
			tr.mu.Unlock()
		}
		if tr.r.OnEvent != nil {
			tr.emit(n, Event{Kind: EventStep, Loop: e})
		}
	}
	if hooks != nil {
		hooks.wire(&cfg)
	}
	return loop.Run(ctx, cfg, msgs)
}

func (tr *tree) emit(n *node, e Event) {
	if tr.r.OnEvent == nil {
		return
	}
	tr.r.OnEvent(tr.stamp(n, e))
}

// stamp is e as an event of n: its instance, parent, type and depth set.
func (tr *tree) stamp(n *node, e Event) Event {
	tr.mu.Lock()
	e.Instance, e.Parent, e.Type, e.Depth = n.inst.ID, n.inst.Parent, n.inst.Type, n.inst.Depth
	tr.mu.Unlock()
	return e
}

// end records how an instance's run ended: in state, terminal or waiting
// (asking, paused), with report.
func (tr *tree) end(n *node, res *loop.Result, state instance.State, report string, err error) {
	c, ok := tr.prices.Cost(n.inst.Model, res.Usage)
	now := tr.clock.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n.transcript = res.Messages
	n.inst.State, n.inst.UpdatedAt = state, now
	if state.Terminal() {
		n.inst.EndedAt = now
	}
	n.inst.StopReason = string(res.StopReason)
	n.inst.Incomplete = incomplete(res.StopReason)
	n.inst.Turns, n.inst.ToolCalls, n.inst.Usage = res.Turns, res.ToolCalls, res.Usage
	n.inst.Report = report
	if ok {
		n.inst.Cost = &c
	}
	if err != nil {
		n.inst.Error = err.Error()
	}
	if p := n.parent; p != nil {
		p.below.Add(n.inst.Usage)
		p.below.Add(n.below)
		p.belowCost += c + n.belowCost
		p.belowOK = p.belowOK && ok && n.belowOK
	}
}

func (tr *tree) outcome(res *loop.Result) *Outcome {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	o := &Outcome{Result: res, CostKnown: true, transcripts: make(map[string][]llm.Message, len(tr.nodes))}
	nodes := slices.Clone(tr.nodes)
	slices.SortStableFunc(nodes, func(a, b *node) int { return slices.Compare(a.order, b.order) })
	for _, n := range nodes {
		inst := n.inst
		o.transcripts[inst.ID] = n.transcript
		inst.Artifacts = append([]string(nil), inst.Artifacts...)
		o.Instances = append(o.Instances, inst)
		o.Usage.Add(inst.Usage)
		if inst.Cost != nil {
			o.Cost += *inst.Cost
		} else {
			o.CostKnown = false
		}
	}
	return o
}

// Prices is the price table the runner charges instances by: deputy.yaml's
// prices over the built-in ones (cost.Builtin), an entry of deputy.yaml
// replacing every built-in row it shadows (cost.Table.With).
func (r *Runner) Prices() cost.Table {
	var over cost.Table
	if r.Config != nil {
		over = r.Config.Prices
	}
	return cost.Builtin().With(over)
}

// StateOf is the state a run that stopped for stop leaves its instance in,
// and whether its result is partial; err is the run's error. A run that
// stopped to wait (loop.StopSuspended) has not ended: it leaves its
// instance asking when its last turn asked its parent (asked; see Asked),
// paused otherwise (its inbox said pause). The one mapping from a run's
// stop to an instance's state: the tracer uses it too.
func StateOf(stop loop.StopReason, asked bool, err error) (instance.State, bool) {
	switch stop {
	case loop.StopCompleted, loop.StopRefusal:
		return instance.Completed, false
	case loop.StopWallTime:
		return instance.TimedOut, true
	case loop.StopCancelled:
		return instance.Cancelled, true
	case loop.StopModelError, loop.StopStepError:
		return instance.Failed, true
	case loop.StopSuspended:
		if asked {
			return instance.Asking, false
		}
		return instance.Paused, false
	}
	if err != nil {
		return instance.Failed, true
	}
	// A budget or limit ended it: it completed what it could.
	return instance.Completed, true
}

// Asked reports whether res is a run that stopped to wait after its last
// turn asked its parent: a successful ask_parent call (ask_parent is the
// one suspending tool, and a suspending call stops the run after its
// turn) whose result waits in Pending.
func Asked(res *loop.Result) bool {
	if res.StopReason != loop.StopSuspended || res.Pending == nil || len(res.Messages) == 0 {
		return false
	}
	if slices.ContainsFunc(res.Pending.Content, loop.IsHeld) {
		return true // a call waits for approval: asked, as a question
	}
	asks := map[string]bool{}
	for _, u := range res.Messages[len(res.Messages)-1].ToolUses() {
		if u.Name == agentdef.AskTool {
			asks[u.ID] = true
		}
	}
	for _, b := range res.Pending.Content {
		if b.Type == llm.TypeToolResult && asks[b.ToolUseID] && !b.IsError {
			return true
		}
	}
	return false
}

// endState is the state res leaves its instance in (StateOf).
func endState(res *loop.Result, err error) (instance.State, bool) {
	return StateOf(res.StopReason, Asked(res), err)
}

func incomplete(stop loop.StopReason) bool {
	_, partial := StateOf(stop, false, nil)
	return partial
}
