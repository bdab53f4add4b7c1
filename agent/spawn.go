package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// SpawnInput is what spawn_subagent takes: from a parent model, and from
// an MCP client (package mcpserver), which is offered the same schema
// without what does not apply to it (SpawnSchema), so both name the same
// things the same way. The names are Claude Code's Task tool's where it
// has them (subagent_type, description); the task itself is task, not its
// prompt, as in fan_out's tasks (FanTask), the HTTP API and the library,
// so that one word means one thing across deputy.
type SpawnInput struct {
	Type        string        `json:"subagent_type"`
	Task        string        `json:"task"`
	Description string        `json:"description,omitempty"`
	Mode        agentdef.Mode `json:"mode,omitempty"`
	Model       string        `json:"model,omitempty"`
	Background  bool          `json:"background,omitempty"`
}

// The optional fields of SpawnInput a schema may leave out (SpawnSchema).
const (
	SpawnDescription = "description"
	SpawnMode        = "mode"
	SpawnModel       = "model"
	SpawnBackground  = "background"
)

// spawnProps are SpawnInput's properties, in the schema's order.
var spawnProps = []struct{ name, schema string }{
	{"subagent_type", `{"type":"string","description":"Which subagent type to start; one of the types listed in this tool's description."}`},
	{"task", `{"type":"string","minLength":1,"description":"The complete, self-contained task: what to do, what to report, and every fact the subagent needs. An isolated subagent sees nothing else of your conversation."}`},
	{SpawnDescription, `{"type":"string","description":"A short label for the task (3-6 words), shown to people watching."}`},
	{SpawnMode, `{"type":"string","enum":["isolated","fork"],"description":"isolated: start fresh with only the task. fork: continue from this conversation, on your model (so no model with it). Default: the type's own mode."}`},
	{SpawnModel, `{"type":"string","description":"Run on another model than the type's: a tier (haiku, sonnet, opus) or provider:model."}`},
	{SpawnBackground, `{"type":"boolean","description":"Return at once with the subagent's id and go on while it works; subagent_wait collects its report."}`},
}

// SpawnSchema is SpawnInput's JSON schema, less the optional properties
// named in omit (subagent_type and task are always there). Anything else
// in the input is refused (additionalProperties), so a client sending a
// field its schema leaves out is told, not ignored.
func SpawnSchema(omit ...string) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	sep := ""
	for _, p := range spawnProps {
		if p.name != "subagent_type" && p.name != "task" && slices.Contains(omit, p.name) {
			continue
		}
		fmt.Fprintf(&b, "%s%q:%s", sep, p.name, p.schema)
		sep = ","
	}
	b.WriteString(`},"required":["subagent_type","task"],"additionalProperties":false}`)
	return json.RawMessage(b.String())
}

// spawnSchema is the spawn tool's: every field.
var spawnSchema = SpawnSchema()

// spawnInput is a spawn as the tree runs it: what the model sent, and what
// fan_out sets for each of its tasks.
type spawnInput struct {
	SpawnInput

	tools     []string             // narrows the type's allowlist
	timeout   time.Duration        // bounds its wall time
	sub       string               // the task's id: names the child apart from its siblings of one call
	def       *agentdef.Definition // a definition of deputy's own (a merge's), not from the catalog
	isolation agentdef.Isolation   // replaces the type's when set
}

// spawnTool is spawn_subagent. One serves a whole tree: the calling
// instance comes from the call's context (nodeFrom).
type spawnTool struct {
	tree *tree
	spec llm.ToolSpec
}

// Spec renders the catalog into the description, so the parent model can
// route by each type's description. It is computed once: a fork child's
// requests repeat the parent's tool definitions byte for byte.
func (s *spawnTool) Spec() llm.ToolSpec {
	if s.spec.Name == "" {
		s.spec = llm.ToolSpec{Name: agentdef.SpawnTool, Description: s.describe(), InputSchema: spawnSchema}
	}
	return s.spec
}

func (s *spawnTool) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Delegate a task to a subagent: a separate agent with its own context window that "+
		"works on the task with its own tools and returns only a short report (at most a few thousand "+
		"characters), plus the files it changed and what it cost. Use it to keep bulky reading out of "+
		"your context, or to run independent tasks in parallel: several calls in one turn run at the "+
		"same time (up to %d). Do not delegate what you can do in one or two tool calls.\n\n"+
		"Subagent types:\n", s.tree.maxPar)
	b.WriteString(agentdef.Describe(s.tree.catalog.List()))
	return strings.TrimRight(b.String(), "\n")
}

// ReadOnly is false: a child may change the workspace.
func (*spawnTool) ReadOnly() bool { return false }

// Resumable is true under a ChildRunner: a spawn call run again after a
// crash names the same child and reattaches to it, never starting a
// second one.
func (s *spawnTool) Resumable() bool { return s.tree.r.Children != nil }

// Concurrent lets a turn's spawns run at the same time: the tool bounds
// them (MaxParallel) and makes writing children take turns itself.
func (*spawnTool) Concurrent() bool { return true }

// Run starts a child and waits for its relay. Refusals (unknown type,
// pinned mode, depth, budget) are errors the parent model sees; so is a
// child that failed, with its report.
func (s *spawnTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	tr := s.tree
	parent, in, err := callInput[SpawnInput](ctx, agentdef.SpawnTool, raw)
	if err != nil {
		return "", err
	}
	child, msgs, err := tr.prepare(ctx, parent, spawnInput{SpawnInput: in})
	if err != nil {
		return "", err
	}
	if in.Background || child.def.Background {
		return tr.startChild(ctx, child, msgs)
	}
	relay := tr.runChild(ctx, child, msgs)
	out, failed := relay.ToolResult()
	if failed {
		return "", errors.New(out)
	}
	return out, nil
}

// prepare checks a spawn request and builds the child: its definition,
// model, tools, and first messages. Nothing is listed or started when it
// fails.
func (tr *tree) prepare(ctx context.Context, parent *node, in spawnInput) (*node, []llm.Message, error) {
	if depth := parent.inst.Depth; depth >= tr.maxDepth {
		return nil, nil, fmt.Errorf("spawn refused: an instance at depth %d cannot spawn subagents (max_depth %d); do the work yourself", depth, tr.maxDepth)
	}
	if strings.TrimSpace(in.Task) == "" {
		return nil, nil, errors.New("spawn refused: the task is empty")
	}
	def, err := tr.spawnType(in)
	if err != nil {
		return nil, nil, err
	}
	mode, err := spawnMode(parent, def, in.Mode)
	if err != nil {
		return nil, nil, err
	}
	if err := override(def, mode, in); err != nil {
		return nil, nil, err
	}
	if err := tr.checkFence(def); err != nil {
		return nil, nil, err
	}
	if tr.budget != nil && tr.budget.Spent() {
		return nil, nil, fmt.Errorf("spawn refused: the tree budget is spent (%s)", tr.budget)
	}
	tr.bound(parent, def, in)

	c, err := tr.build(parent, def, mode, in.Task)
	if err != nil {
		return nil, nil, err
	}
	c.inst.Description, c.sub = in.Description, in.sub
	if !tr.budget.priced(c.inst.Model) {
		return nil, nil, fmt.Errorf("spawn refused: the tree has a USD budget and %s has no price, so its spending could not be counted", c.inst.Model)
	}
	msgs, err := firstMessages(ctx, c, mode)
	if err != nil {
		return nil, nil, err
	}
	// Last, once nothing else can refuse the spawn: the servers run from
	// here until the child's run ends (stopMCP), or it never runs.
	if err := tr.startMCP(ctx, c); err != nil {
		return nil, nil, fmt.Errorf("spawn refused: %w", err)
	}
	return c, msgs, nil
}

// spawnType is the definition a spawn runs, a copy to adjust: the
// catalog's type, or deputy's own (a merge's). An unknown type is refused
// with the list of those that exist, so the model can correct its call.
func (tr *tree) spawnType(in spawnInput) (*agentdef.Definition, error) {
	if in.def != nil {
		return in.def.Clone(), nil
	}
	def, ok := tr.catalog.Lookup(in.Type)
	if !ok {
		return nil, fmt.Errorf("spawn refused: unknown subagent_type %q; the types are: %s", in.Type, typeNames(tr.catalog.List()))
	}
	return def, nil
}

// spawnMode is the mode a child runs in: its type's, or the one the spawn
// asks for unless the type pins its own. Under a parent with no
// conversation of its own to fork (Task.Inherited) it runs isolated.
func spawnMode(parent *node, def *agentdef.Definition, want agentdef.Mode) (agentdef.Mode, error) {
	mode := def.Mode
	if want != "" && want != mode {
		if def.ModePinned {
			return "", fmt.Errorf("spawn refused: %s always runs %s (its mode is pinned), so mode %q is not allowed", def.Name, def.Mode, want)
		}
		mode = want
	}
	if mode != agentdef.ModeIsolated && mode != agentdef.ModeFork {
		return "", fmt.Errorf("spawn refused: mode %q does not exist (isolated or fork)", mode)
	}
	if parent.heir != nil {
		mode = agentdef.ModeIsolated // Task.Inherited: no conversation to fork
	}
	return mode, nil
}

// override puts on def what the spawn asks over its type: another model
// (not for a fork, which runs on its parent's to reuse its prompt cache),
// and a fence at least as tight as the type's.
func override(def *agentdef.Definition, mode agentdef.Mode, in spawnInput) error {
	if in.Model != "" {
		if mode == agentdef.ModeFork {
			return fmt.Errorf("spawn refused: a fork child runs on the parent's model (to reuse its prompt cache); model %q cannot be set", in.Model)
		}
		if _, _, ok := agentdef.ParseModel(in.Model); !ok {
			return fmt.Errorf("spawn refused: model %q is neither a tier (haiku, sonnet, opus, inherit) nor provider:model", in.Model)
		}
		def.Model = in.Model
	}
	if in.isolation != "" {
		// A task may be fenced more tightly than its type, never less.
		if in.isolation.Looser(def.Isolation) {
			return fmt.Errorf("spawn refused: %s runs with isolation %s; a task cannot lower it to %s",
				def.Name, def.Isolation, in.isolation)
		}
		def.Isolation = in.isolation
	}
	return nil
}

// bound narrows def to a fan-out task's tools and timeout, and its wall
// time to what its parent has left.
func (tr *tree) bound(parent *node, def *agentdef.Definition, in spawnInput) {
	if in.tools != nil {
		def.Tools = def.EffectiveTools(in.tools)
	}
	w := &def.Budgets.WallTime
	if in.timeout > 0 && (*w == 0 || in.timeout < *w) {
		*w = in.timeout
	}
	if parent.cfg.Limits.WallTime > 0 {
		// Never above what its parent has left: a child outliving its
		// parent's deadline would be cut off without its report.
		left := max(parent.cfg.Limits.WallTime-tr.clock.Now().Sub(parent.start), time.Millisecond)
		if *w == 0 || left < *w {
			*w = left
		}
	}
}

// firstMessages are what child c starts on: its task; for a fork, the
// parent's transcript up to the spawn call, then the task with the type's
// instructions (ForkTranscript, Definition.ForkTask).
func firstMessages(ctx context.Context, c *node, mode agentdef.Mode) ([]llm.Message, error) {
	if mode != agentdef.ModeFork {
		return []llm.Message{llm.UserText(c.inst.Task)}, nil
	}
	call, ok := loop.CallFrom(ctx)
	if !ok {
		return nil, errors.New("spawn refused: fork needs the parent's transcript, and this call has none")
	}
	return ForkTranscript(call.Transcript, call.ID, c.def.ForkTask(c.skills, c.inst.Task))
}

// build makes the node of a child of parent: its model, tools, prompt and
// limits from its definition and mode. Its first messages are the
// caller's: the task, a fork of the parent's transcript, or, for a child
// continued in a later run, its stored transcript.
func (tr *tree) build(parent *node, def *agentdef.Definition, mode agentdef.Mode, task string) (*node, error) {
	policy, err := childPolicy(parent, def)
	if err != nil {
		return nil, fmt.Errorf("spawn refused: %w", err)
	}
	c := &node{inst: instance.Record{Type: def.Name, Task: task, Mode: string(mode)}, def: def, policy: policy}
	c.skills, _ = agentdef.GrantedSkills(tr.r.Skills, def.Skills)
	if slices.Contains(def.DisallowedTools, agentdef.SkillTool) {
		c.skills = nil
	}
	cfg := loop.Config{
		Clock:  tr.clock,
		Limits: limitsOf(def),
		Stream: tr.r.Stream,
	}
	if mode == agentdef.ModeFork {
		tr.forkChild(parent, c, def, &cfg)
	} else {
		err = tr.isolatedChild(parent, c, def, &cfg)
	}
	if err != nil {
		return nil, err
	}
	cfg.Budget = tr.loopBudget(c.inst.Model)
	c.cfg = cfg
	return c, nil
}

// isolatedChild sets up a child that starts from its system prompt and
// the task alone, on its own model and tools.
func (tr *tree) isolatedChild(parent, c *node, def *agentdef.Definition, cfg *loop.Config) error {
	model, name, spec, err := tr.resolveModel(parent, def.Model)
	if err != nil {
		return err
	}
	cfg.Model, cfg.ModelName, c.inst.Model = model, name, spec

	c.avail = parent.avail.Filter(def.EffectiveTools(parent.avail.Names()), nil)
	offered, err := c.avail.Join(tr.pick(tr.childOwn(def, parent.inst.Depth+1, len(c.skills) > 0)))
	if err != nil {
		return err
	}
	cfg.Tools = offered
	cfg.ToolChoice = toolChoiceOf(def.ToolChoice)
	cfg.System = withGuidance(def.SubagentSystem(c.skills), offered)
	c.writes = writes(c.avail)
	return nil
}

// forkChild sets up a child that continues the parent's conversation: the
// parent's model, system prompt and tool definitions, byte for byte (and
// its transcript: see prepare), so the provider's prompt cache serves the
// whole prefix. Tools outside the child's allowlist stay offered (changing
// the list would change the prefix) and are refused when called.
func (tr *tree) forkChild(parent, c *node, def *agentdef.Definition, cfg *loop.Config) {
	p := parent.cfg
	cfg.Model, cfg.ModelName, cfg.System, cfg.ToolChoice, cfg.Compaction = p.Model, p.ModelName, p.System, p.ToolChoice, p.Compaction
	c.inst.Model = parent.inst.Model

	// The child may call what its allowlist grants of the parent's tools,
	// and of deputy's those a child of its type and depth would be offered
	// isolated, skill aside: its skills come inline (Definition.ForkTask).
	own := tr.childOwn(def, parent.inst.Depth+1, false)
	runtime := agentdef.RuntimeTools()
	// The parent's MCP tools run in its own sessions, which the child must
	// not lean on (a background fork outlives them): only the tools of
	// servers the child starts itself stay, served by its sessions
	// (startMCP).
	servers := def.StartedServers()
	allowed := slices.DeleteFunc(p.Tools.Names(), func(n string) bool {
		switch {
		case slices.Contains(runtime, n):
			return !slices.Contains(own, n)
		case agentdef.IsMCPTool(n) && !slices.ContainsFunc(servers, func(s agentdef.MCPServer) bool { return s.Name == agentdef.MCPServerOf(n) }):
			return true
		}
		return !def.Allows(n)
	})
	c.avail = parent.avail.Filter(allowed, nil)
	cfg.Tools = p.Tools.Refuse(func(n string) bool { return slices.Contains(allowed, n) },
		fmt.Sprintf("subagent type %s may use only: %s", def.Name, strings.Join(allowed, ", ")))
	c.writes = writes(c.avail)
}

// resolveModel picks a child's model: a tier through the config, a
// provider:model through Runner.Models, and the parent's otherwise.
func (tr *tree) resolveModel(parent *node, want string) (llm.Model, string, string, error) {
	pm, inherit := tr.r.Config.ResolveModel(want)
	switch {
	case inherit && parent.heir != nil:
		return parent.heir.Model, parent.heir.Name, parent.heir.Spec, nil
	case inherit:
		return parent.cfg.Model, parent.cfg.ModelName, parent.inst.Model, nil
	}
	if tr.r.Models == nil {
		return nil, "", "", fmt.Errorf("spawn refused: model %s: this runner cannot open other models", pm)
	}
	m, err := tr.r.Models(pm)
	if err != nil {
		if !strings.Contains(err.Error(), pm) { // providers' errors name the model already
			err = fmt.Errorf("model %s: %w", pm, err)
		}
		return nil, "", "", fmt.Errorf("spawn refused: %w", err)
	}
	_, name, _ := strings.Cut(pm, ":")
	return m, name, pm, nil
}

func limitsOf(d *agentdef.Definition) loop.Limits {
	b := d.Budgets
	l := loop.Limits{
		MaxTurns:        d.MaxTurns,
		MaxTotalTokens:  int64(b.TotalTokens),
		MaxToolCalls:    b.ToolCalls,
		WallTime:        b.WallTime,
		MaxOutputTokens: b.OutputTokensPerCall,
	}
	if l.WallTime > 0 {
		l.SoftWallTime = time.Duration(float64(l.WallTime) * SoftTimeoutShare)
	}
	return l
}

func toolChoiceOf(s string) llm.ToolChoice {
	switch s {
	case "", "auto":
		return llm.ToolChoice{}
	case "any", "none":
		return llm.ToolChoice{Type: s}
	}
	return llm.ToolChoice{Type: "tool", Name: s}
}

// writes reports whether a tool set can change the workspace.
func writes(s *tool.Set) bool {
	for _, n := range s.Names() {
		if !s.Concurrent(n) {
			return true
		}
	}
	return false
}
