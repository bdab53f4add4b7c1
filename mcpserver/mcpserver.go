// Package mcpserver exposes deputy's managed subagents to MCP clients
// (coding agents, editors) through the official Go SDK: `deputy mcp`
// serves it over stdio, `deputy serve` over streamable HTTP at /mcp.
//
// A client is to deputy what a parent agent is: spawn_subagent starts a
// root instance of a subagent type (deputy.Task.Type), which runs exactly
// as an agent's spawn of that type would (its prompt, tools, model tier,
// limits, report cap, spawn rights), durably; its relay, the text a parent
// model reads as the spawn tool's result, is the tool's result. A
// foreground spawn waits for the instance to settle; a background one
// returns its id at once, and subagent_wait collects the relay. An instance
// that asks settles with its question; subagent_answer answers it.
//
// Decisions:
//   - The tools act on the runtime's database as a whole: subagent_list
//     lists its root instances newest first, whoever started them (an MCP
//     client, the CLI, a program), since they are all the client's to
//     inspect and the runtime does not know one client from another; a
//     child is reached by its id all the same (status, wait, cancel), and
//     answered or steered by its own parent only.
//   - A foreground spawn whose call is cancelled (the client gave up, or
//     went away) cancels its instance, as a parent's cancelled spawn call
//     cancels its child: nothing runs on unseen. A background instance
//     outlives the session: it runs while the runtime does, and a later
//     `deputy mcp`, `serve` or `worker` on the database resumes it.
//   - Failures are tool results with IsError and a sentence that says what
//     to do (an unknown id, an illegal transition, an unknown type), never
//     protocol errors: the client's model reads them and goes on.
//   - The spawn tool's description lists the catalog as Open found it (as
//     agent's spawn tool renders it, agent.Describe); list_definitions
//     reads the live catalog, which the engine refreshes from the database.
//   - spawn_subagent takes what the agent's spawn tool takes, by the same
//     names (agent.SpawnInput, agent.SpawnSchema), less mode (a client's
//     conversation is not deputy's to fork) and description (a root
//     instance has no label but its task). A call is checked against that
//     schema by a tool.Set, as an agent's call is, so both refuse the same
//     input in the same words. The argument was called type here before
//     it took the agent's name, subagent_type: type is still accepted, not
//     advertised, for one release (docs/api.md), then refused as any
//     unknown field is.
//   - Authentication is not here: Handler is mounted behind the server's
//     token check.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// Tool names. spawn_subagent and the subagent_* tools are named as a
// parent agent's are, so a client's model that knows one knows the other.
const (
	SpawnTool       = agentdef.SpawnTool
	WaitTool        = agentdef.WaitTool
	StatusTool      = agentdef.StatusTool
	ListTool        = agentdef.ListTool
	AnswerTool      = agentdef.AnswerTool
	SendTool        = agentdef.SendTool
	PauseTool       = agentdef.PauseTool
	ResumeTool      = agentdef.ResumeTool
	CancelTool      = agentdef.CancelTool
	ApproveTool     = agentdef.ApproveTool
	DefinitionsTool = "list_definitions"
)

// Defaults.
const (
	DefaultListLimit = 20
	MaxListLimit     = 200
	// cancelSettle bounds how long subagent_cancel waits for the instance
	// to record its end before answering.
	cancelSettle = 10 * time.Second
)

// Options configure the server.
type Options struct {
	// Clock times subagent_wait's timeout; clock.Real when nil.
	Clock clock.Clock
	// MaxWait caps subagent_wait's timeout (default and cap:
	// agent.DefaultWaitTimeout, ten minutes).
	MaxWait time.Duration
	// Version is the server's version in the MCP handshake; "dev" when
	// empty.
	Version string
	// Logger receives the SDK's logs (stderr for stdio: stdout is the
	// protocol); nil discards them.
	Logger *slog.Logger
}

// server holds what the tool handlers share.
type server struct {
	rt      *deputy.Runtime
	clock   clock.Clock
	maxWait time.Duration
	// spawnSet is the spawn tool as a deputy tool, whose Call checks a
	// call's arguments against its schema (see spawnTool).
	spawnSet *tool.Set
}

// New returns an MCP server whose tools reach rt's instances. Serve it
// with mcp.Server.Run on a transport (mcp.StdioTransport), or over HTTP
// with Handler.
func New(rt *deputy.Runtime, opts Options) *mcp.Server {
	s := &server{rt: rt, clock: opts.Clock, maxWait: opts.MaxWait}
	s.spawnSet = tool.MustSet(spawnTool{s}) // a fixed schema: a failure is a programming error the tests catch
	if s.clock == nil {
		s.clock = clock.Real
	}
	if s.maxWait <= 0 || s.maxWait > agent.DefaultWaitTimeout {
		s.maxWait = agent.DefaultWaitTimeout
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "deputy", Title: "deputy: managed subagents", Version: version},
		&mcp.ServerOptions{
			Instructions: "deputy runs subagents: separate agents, each with its own context window, tools and " +
				"model, that work on a task durably and return a short report. spawn_subagent starts one " +
				"(list_definitions describes the types); subagent_wait, subagent_status and subagent_list follow " +
				"them; subagent_answer answers one that asks; subagent_send, subagent_pause, subagent_resume and " +
				"subagent_cancel steer them.",
			Logger:       opts.Logger,
			Capabilities: &mcp.ServerCapabilities{}, // tools only (no logging to the client)
		})
	s.register(srv)
	return srv
}

// Handler serves New's server over MCP's streamable HTTP transport, one
// session per client. It does no authentication: mount it behind the
// token check.
func Handler(rt *deputy.Runtime, opts Options) http.Handler {
	srv := New(rt, opts)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: opts.Logger, SessionTimeout: 30 * time.Minute})
}

// Inputs of the tools. Field tags give the JSON schema the SDK infers: a
// field without omitempty is required, the jsonschema tag is its
// description.
type (
	waitInput struct {
		ID      string  `json:"id" jsonschema:"The subagent's instance id, as spawn_subagent returned it."`
		Timeout float64 `json:"timeout_seconds,omitempty" jsonschema:"Give up waiting after this many seconds (default and most: 600); the subagent goes on."`
	}
	idInput struct {
		ID string `json:"id" jsonschema:"The subagent's instance id."`
	}
	textInput struct {
		ID   string `json:"id" jsonschema:"The subagent's instance id."`
		Text string `json:"text" jsonschema:"The text to give it."`
	}
	listInput struct {
		State string `json:"state,omitempty" jsonschema:"Only instances in these states, comma-separated: created, running, asking, paused, completed, failed, timed_out, cancelled."`
		Limit int    `json:"limit,omitempty" jsonschema:"At most this many, newest first (default 20, most 200)."`
	}
	approveInput struct {
		ID      string `json:"id" jsonschema:"The subagent's instance id."`
		Approve bool   `json:"approve" jsonschema:"true runs the held call; false refuses it."`
		Always  bool   `json:"always,omitempty" jsonschema:"With approve: the rule that asked allows such calls for the rest of this tree's session."`
		Reason  string `json:"reason,omitempty" jsonschema:"With approve false: why, which the subagent's model reads as the call's error."`
	}
	noInput struct{}
)

func boolPtr(b bool) *bool { return &b }

func (s *server) register(srv *mcp.Server) {
	closed := boolPtr(false) // deputy's own instances, no outside world
	srv.AddTool(&mcp.Tool{Name: SpawnTool, Description: s.describeSpawn(), InputSchema: spawnSchema,
		Annotations: &mcp.ToolAnnotations{Title: "Start a subagent", DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(true)}},
		s.callSpawn)
	mcp.AddTool(srv, &mcp.Tool{Name: WaitTool, Description: "Wait for a subagent until it ends or asks a question, " +
		"or the timeout passes, and return its report (or its question, or how it stands if it is still running).",
		Annotations: &mcp.ToolAnnotations{Title: "Wait for a subagent", ReadOnlyHint: true, OpenWorldHint: closed}}, s.wait)
	mcp.AddTool(srv, &mcp.Tool{Name: StatusTool, Description: "How a subagent is doing: its state, turns, tool calls " +
		"and tokens; its question if it asks one; its report if it has ended.",
		Annotations: &mcp.ToolAnnotations{Title: "Subagent status", ReadOnlyHint: true, OpenWorldHint: closed}}, s.status)
	mcp.AddTool(srv, &mcp.Tool{Name: ListTool, Description: "List the subagents started on this deputy database (root " +
		"instances, whoever started them), newest first, with their states.",
		Annotations: &mcp.ToolAnnotations{Title: "List subagents", ReadOnlyHint: true, OpenWorldHint: closed}}, s.list)
	mcp.AddTool(srv, &mcp.Tool{Name: AnswerTool, Description: "Answer the question a subagent asked; it goes on with " +
		"the answer. Then subagent_wait for its report.",
		Annotations: &mcp.ToolAnnotations{Title: "Answer a subagent", OpenWorldHint: closed}}, s.answer)
	mcp.AddTool(srv, &mcp.Tool{Name: SendTool, Description: "Send a running subagent a message: it reads it at its " +
		"next turn. Use it to steer or correct one.",
		Annotations: &mcp.ToolAnnotations{Title: "Message a subagent", OpenWorldHint: closed}}, s.send)
	mcp.AddTool(srv, &mcp.Tool{Name: PauseTool, Description: "Pause a subagent: a running one stops at its next turn " +
		"until subagent_resume.",
		Annotations: &mcp.ToolAnnotations{Title: "Pause a subagent", OpenWorldHint: closed}}, s.pause)
	mcp.AddTool(srv, &mcp.Tool{Name: ResumeTool, Description: "Resume a paused subagent; subagent_wait then collects " +
		"its report.",
		Annotations: &mcp.ToolAnnotations{Title: "Resume a subagent", OpenWorldHint: closed}}, s.resume)
	mcp.AddTool(srv, &mcp.Tool{Name: CancelTool, Description: "Cancel a subagent and the subagents it started; what " +
		"they did so far is kept, and its partial report is returned.",
		Annotations: &mcp.ToolAnnotations{Title: "Cancel a subagent", DestructiveHint: boolPtr(true), OpenWorldHint: closed}}, s.cancel)
	mcp.AddTool(srv, &mcp.Tool{Name: ApproveTool, Description: "Approve or refuse the tool call a subagent waits on " +
		"an approval for (subagent_status shows the call, its arguments and the rule that asked). An approved call " +
		"runs once; a refused one is an error the subagent's model reads, with the reason. Then subagent_wait.",
		Annotations: &mcp.ToolAnnotations{Title: "Approve a subagent's call", DestructiveHint: boolPtr(true), OpenWorldHint: closed}}, s.approve)
	mcp.AddTool(srv, &mcp.Tool{Name: DefinitionsTool, Description: "List the subagent types spawn_subagent can " +
		"start: each one's description, model, tools, limits and mode.",
		Annotations: &mcp.ToolAnnotations{Title: "Subagent types", ReadOnlyHint: true, OpenWorldHint: closed}}, s.definitions)
}

// describeSpawn is spawn_subagent's description: what it does, then the
// catalog as agent's spawn tool lists it.
func (s *server) describeSpawn() string {
	return "Delegate a task to a deputy subagent: a separate agent with its own context window, tools and model " +
		"that works on the task and returns only a short report, plus the files it changed and what it cost. " +
		"By default the call waits for the report; with background: true it returns the subagent's id at once " +
		"(subagent_wait collects the report). A subagent that asks a question returns it with its id: answer " +
		"with subagent_answer, then subagent_wait.\n\nSubagent types:\n" + agentdef.Describe(s.rt.Definitions())
}

// text is a tool result of one text block.
func text(s string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isError}
}

// spawnSchema is the agent's spawn schema less what does not apply to a
// client (see the package's decisions).
var spawnSchema = agent.SpawnSchema(agent.SpawnMode, agent.SpawnDescription)

// oldTypeField is what subagent_type was called here before it took the
// agent's name; accepted, not advertised, for one release.
const oldTypeField = "type"

// callSpawn checks a call against spawnSchema and runs it, through
// spawnSet: a refusal, a failed relay or bad arguments is an error result,
// in the words an agent's spawn call gets.
func (s *server) callSpawn(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := renameOldType(req.Params.Arguments)
	if err != nil {
		return text(err.Error(), true), nil
	}
	out, isErr := s.spawnSet.Call(ctx, SpawnTool, args)
	return text(out, isErr), nil
}

// renameOldType gives a call that names the type by its old name the new
// one. Arguments that are not an object are left for the schema check to
// refuse, in its words.
func renameOldType(args json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args, nil
	}
	old, ok := m[oldTypeField]
	if !ok {
		return args, nil
	}
	if _, both := m["subagent_type"]; both {
		return nil, errors.New("spawn refused: give subagent_type only (type is its old name)")
	}
	m["subagent_type"] = old
	delete(m, oldTypeField)
	return json.Marshal(m)
}

// spawnTool is spawn_subagent as a deputy tool, so that a tool.Set checks
// its arguments (and turns a panic into an error result) exactly as for an
// agent's spawn call. Its description is the MCP tool's (describeSpawn).
type spawnTool struct{ s *server }

func (spawnTool) Spec() llm.ToolSpec { return llm.ToolSpec{Name: SpawnTool, InputSchema: spawnSchema} }

// ReadOnly is false: it starts an instance.
func (spawnTool) ReadOnly() bool { return false }

// Run starts a root instance of the type and, unless in the background,
// waits for it to settle and returns its relay; a failed relay is the
// error, as in the agent's spawn tool.
func (t spawnTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	s := t.s
	in, err := tool.Decode[agent.SpawnInput](raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(in.Task) == "" {
		return "", errors.New("spawn refused: the task is empty")
	}
	if in.Type == "" {
		var names []string
		for _, d := range s.rt.Definitions() {
			names = append(names, d.Name)
		}
		return "", fmt.Errorf("spawn refused: name the subagent_type to start; the types are: %s", strings.Join(names, ", "))
	}
	if m := in.Model; m != "" && m != "fake" {
		if _, _, ok := agentdef.ParseModel(m); !ok {
			return "", fmt.Errorf("spawn refused: model %q is neither a tier (haiku, sonnet, opus, inherit) nor provider:model", m)
		}
	}
	id, err := s.rt.Start(ctx, deputy.Task{Text: in.Task, Type: in.Type, Model: in.Model})
	if err != nil {
		return "", fmt.Errorf("spawn refused: %w", err)
	}
	if in.Background {
		return fmt.Sprintf("subagent %s (%s): started in the background. It works while you go on; subagent_wait "+
			"collects its report, subagent_status tells how it is doing.", id, in.Type), nil
	}
	if _, err := s.rt.Wait(ctx, id); err != nil {
		if ctx.Err() != nil {
			// As a parent's cancelled spawn call cancels its child.
			cerr := s.rt.Cancel(context.WithoutCancel(ctx), id)
			return "", fmt.Errorf("spawn of %s interrupted (%v); the subagent was cancelled%s", id, context.Cause(ctx), failedTo(cerr))
		}
		return "", fmt.Errorf("waiting for %s: %w", id, err)
	}
	out, failed, err := s.relayText(ctx, id)
	if err == nil && failed {
		err = errors.New(out)
		out = ""
	}
	return out, err
}

func failedTo(err error) string {
	if err == nil {
		return ""
	}
	return " (or tried to be: " + err.Error() + ")"
}

// relay is instance id's relay as the tool's result: an error result when
// it failed.
func (s *server) relay(ctx context.Context, id string) (*mcp.CallToolResult, any, error) {
	out, failed, err := s.relayText(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return text(out, failed), nil, nil
}

// relayText is instance id's relay as a parent model reads it, and
// whether it failed.
func (s *server) relayText(ctx context.Context, id string) (string, bool, error) {
	rel, err := s.rt.Relay(ctx, id)
	if err != nil {
		return "", false, known(id, err)
	}
	out, failed := rel.ToolResult()
	return out, failed, nil
}

// known turns a missing instance into an error that says what to do.
func known(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no subagent %q on this deputy database (subagent_list lists them)", id)
	}
	return err
}

// errWaited is the cause of a wait whose timeout passed.
var errWaited = errors.New("the wait's timeout passed")

func (s *server) wait(ctx context.Context, _ *mcp.CallToolRequest, in waitInput) (*mcp.CallToolResult, any, error) {
	if in.Timeout < 0 {
		return nil, nil, errors.New("timeout_seconds must not be negative")
	}
	timeout := s.maxWait
	if in.Timeout > 0 && in.Timeout < s.maxWait.Seconds() {
		// Compared in seconds first: a huge float would overflow the
		// conversion to a Duration and wrap negative.
		timeout = time.Duration(in.Timeout * float64(time.Second))
	}
	if _, err := s.rt.Get(ctx, in.ID); err != nil {
		return nil, nil, known(in.ID, err)
	}
	wctx, cancel := clock.WithTimeout(ctx, s.clock, timeout, errWaited)
	defer cancel()
	if _, err := s.rt.Wait(wctx, in.ID); err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(wctx), errWaited) {
			now, err := s.rt.Get(ctx, in.ID)
			if err != nil {
				return nil, nil, known(in.ID, err)
			}
			return text(fmt.Sprintf("still running after %s; it goes on (wait again, or subagent_cancel it).\n%s",
				timeout, statusLine(now)), false), nil, nil
		}
		return nil, nil, known(in.ID, err)
	}
	return s.relay(ctx, in.ID)
}

func (s *server) status(ctx context.Context, _ *mcp.CallToolRequest, in idInput) (*mcp.CallToolResult, any, error) {
	now, err := s.rt.Get(ctx, in.ID)
	if err != nil {
		return nil, nil, known(in.ID, err)
	}
	if now.State.Waiting() {
		a, err := s.rt.Approval(ctx, in.ID)
		if err != nil {
			return nil, nil, known(in.ID, err)
		}
		if a != nil {
			return text(statusLine(now)+"\n"+approvalText(a), false), nil, nil
		}
	}
	if now.State.Terminal() || now.State == instance.Asking {
		return s.relay(ctx, in.ID) // the report, or the question, with the same facts
	}
	return text(statusLine(now), false), nil, nil
}

// approvalText is a pending approval as a client model reads it.
func approvalText(a *deputy.Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "it waits for approval of a %s call (call %s): %s", a.Tool, a.CallID, agentdef.OneLine(string(a.Input), 400))
	if a.Rule != "" {
		fmt.Fprintf(&b, "\nthe rule that asked: %s", a.Rule)
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, "\nwhy: %s", a.Reason)
	}
	b.WriteString("\nsubagent_approve with approve true runs it, with approve false refuses it")
	return b.String()
}

func (s *server) approve(ctx context.Context, _ *mcp.CallToolRequest, in approveInput) (*mcp.CallToolResult, any, error) {
	var err error
	switch {
	case in.Approve && in.Reason != "":
		err = errors.New("a reason goes with a refusal (approve: false)")
	case in.Approve:
		err = s.rt.Approve(ctx, in.ID, in.Always)
	case in.Always:
		err = errors.New("always goes with an approval (approve: true)")
	default:
		err = s.rt.Deny(ctx, in.ID, in.Reason)
	}
	if err != nil {
		return nil, nil, known(in.ID, err)
	}
	if in.Approve {
		return text("approved the call of "+in.ID+"; it runs, and the subagent goes on (subagent_wait collects its report)", false), nil, nil
	}
	return text("refused the call of "+in.ID+"; the subagent goes on without it (subagent_wait collects its report)", false), nil, nil
}

// statusLine is how an instance stands, on a line or two.
func statusLine(in *deputy.Instance) string {
	var b strings.Builder
	fmt.Fprintf(&b, "subagent %s (%s): %s, %d turns, %d tool calls, %d tokens in, %d out", in.ID, in.Type, in.State,
		in.Turns, in.ToolCalls, in.Usage.Prompt(), in.Usage.OutputTokens)
	if in.Cost != nil {
		fmt.Fprintf(&b, ", $%.4f", *in.Cost)
	}
	if in.Parent != "" {
		fmt.Fprintf(&b, "\nit is a subagent of %s", in.Parent)
	}
	if in.State == instance.Paused {
		b.WriteString("\nit was paused: subagent_resume resumes it")
	}
	return b.String()
}

func (s *server) list(ctx context.Context, _ *mcp.CallToolRequest, in listInput) (*mcp.CallToolResult, any, error) {
	limit := in.Limit
	switch {
	case limit < 0:
		return nil, nil, errors.New("limit must not be negative")
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	f := deputy.Filter{OnlyRoots: true}
	for _, st := range strings.Split(in.State, ",") {
		st = strings.TrimSpace(st)
		if st == "" {
			continue
		}
		state, err := instance.ParseState(st)
		if err != nil {
			return nil, nil, err
		}
		f.States = append(f.States, state)
	}
	all, err := s.rt.List(ctx, f) // oldest first
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 {
		return text("No subagents yet.", false), nil, nil
	}
	var b strings.Builder
	shown := 0
	for i := len(all) - 1; i >= 0 && shown < limit; i, shown = i-1, shown+1 {
		in := all[i]
		fmt.Fprintf(&b, "%s (%s): %s, %d turns, %d tokens, started %s: %s\n", in.ID, in.Type, in.State, in.Turns,
			in.Usage.Total(), in.CreatedAt.UTC().Format(time.RFC3339), agentdef.OneLine(in.Task, 80))
	}
	if more := len(all) - shown; more > 0 {
		fmt.Fprintf(&b, "and %d older (a larger limit shows them)\n", more)
	}
	return text(strings.TrimRight(b.String(), "\n"), false), nil, nil
}

func (s *server) answer(ctx context.Context, _ *mcp.CallToolRequest, in textInput) (*mcp.CallToolResult, any, error) {
	if err := s.rt.Answer(ctx, in.ID, in.Text); err != nil {
		return nil, nil, known(in.ID, err)
	}
	return text("answered "+in.ID+"; it goes on (subagent_wait collects its report)", false), nil, nil
}

func (s *server) send(ctx context.Context, _ *mcp.CallToolRequest, in textInput) (*mcp.CallToolResult, any, error) {
	if err := s.rt.Send(ctx, in.ID, in.Text); err != nil {
		return nil, nil, known(in.ID, err)
	}
	return text("sent to "+in.ID+"; it reads the message at its next turn", false), nil, nil
}

func (s *server) pause(ctx context.Context, _ *mcp.CallToolRequest, in idInput) (*mcp.CallToolResult, any, error) {
	if err := s.rt.Pause(ctx, in.ID); err != nil {
		return nil, nil, known(in.ID, err)
	}
	return text("paused "+in.ID+" (a running one stops at its next turn; subagent_resume goes on)", false), nil, nil
}

func (s *server) resume(ctx context.Context, _ *mcp.CallToolRequest, in idInput) (*mcp.CallToolResult, any, error) {
	if err := s.rt.Resume(ctx, in.ID); err != nil {
		return nil, nil, known(in.ID, err)
	}
	return text("resumed "+in.ID+" (subagent_wait collects its report)", false), nil, nil
}

// cancel cancels the instance and returns its relay once its end is
// recorded (at once for one this runtime runs), or says it stops at its
// next turn boundary.
func (s *server) cancel(ctx context.Context, _ *mcp.CallToolRequest, in idInput) (*mcp.CallToolResult, any, error) {
	if err := s.rt.Cancel(ctx, in.ID); err != nil {
		return nil, nil, known(in.ID, err)
	}
	wctx, stop := clock.WithTimeout(ctx, s.clock, cancelSettle, errWaited)
	defer stop()
	if _, err := s.rt.Wait(wctx, in.ID); err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(wctx), errWaited) {
			return text("cancelled "+in.ID+"; it stops at its next turn boundary (subagent_wait returns its partial report)", false), nil, nil
		}
		return nil, nil, known(in.ID, err)
	}
	rel, err := s.rt.Relay(ctx, in.ID)
	if err != nil {
		return nil, nil, known(in.ID, err)
	}
	out, _ := rel.ToolResult()
	// Cancelled as asked: not an error of the call.
	return text(out, false), nil, nil
}

func (s *server) definitions(_ context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	defs := s.rt.Definitions()
	var b strings.Builder
	for _, d := range defs {
		b.WriteString(agentdef.Describe([]*agentdef.Definition{d}) + "\n")
		model := d.Model
		if model == "" {
			model = agentdef.TierInherit
		}
		tools := "all but spawning"
		if d.Tools != nil {
			tools = strings.Join(d.Tools, ", ")
			if tools == "" {
				tools = "none"
			}
		}
		fmt.Fprintf(&b, "  model: %s; tools: %s; max turns: %d; report: at most %d characters", model, tools, d.MaxTurns, d.ReportCap)
		if len(d.DisallowedTools) > 0 {
			b.WriteString("; denied: " + strings.Join(d.DisallowedTools, ", "))
		}
		if len(d.Skills) > 0 {
			b.WriteString("; skills: " + strings.Join(d.Skills, ", "))
		}
		if err := agent.CheckRoot(d); err != nil {
			b.WriteString("\n  not startable here: it runs fenced, so only as a subagent of an agent that spawns it")
		}
		b.WriteByte('\n')
	}
	return text(strings.TrimRight(b.String(), "\n"), false), nil, nil
}
