package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/termui"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// rootSystemPrompt is the system prompt of an agent started by `deputy run`.
const rootSystemPrompt = `You are deputy, an agent that completes the user's task by working in a workspace directory with tools.
Read before you change anything; make the smallest change that does the job; check your work.
Paths are relative to the workspace root %s; the file tools cannot reach outside it.
When you are done, answer with a short report of what you did and what you found.`

type runOptions struct {
	model       string
	scenario    string
	workspace   string
	config      string
	db          string
	maxTurns    int
	maxDepth    int
	maxParallel int
	budget      agent.TreeBudget
	asJSON      bool
	quiet       bool
	detach      bool
	searchURL   string
	timeout     time.Duration
	drain       time.Duration
	style       termui.Style // of stderr: a terminal's colour and status line, or plain
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] TASK",
		Short: "Run an agent, and the subagents it delegates to, on a task in a workspace and print its answer",
		Long: `Runs a root agent on TASK. Every instance, transcript and step is recorded in the
database (--db): if this process dies, "deputy worker" resumes the run from its
last finished step. --detach records the run and leaves it to a worker.

SIGINT (Ctrl-C) or SIGTERM stops this process, not the run: no step starts
any more, the running ones finish within --drain-timeout, and it exits 6
(interrupted) with the run saved as of its last finished step, for "deputy
worker" to resume ("deputy cancel ID" ends it instead). A second signal stops
at once: what still runs is cut off, and a side-effecting call among it is
reported to the model as interrupted when the run resumes.`,
		Example: `  deputy run --model fake "Describe this workspace"
  deputy run --model anthropic:claude-sonnet-4-5 --budget-usd 0.50 "Find the flaky test and fix it"
  deputy run --model fake --detach "Summarize the docs"    # a worker runs it: deputy worker --until-idle
  deputy run --model fake --json -q "Count the Go files"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.style = styleFor(cmd, cmd.ErrOrStderr())
			return runTask(cmd.Context(), o, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", modelFlagHelp)
	f.StringVar(&o.scenario, "scenario", "", "scenario file (YAML) for --model fake (default: the built-in demo)")
	f.StringVar(&o.workspace, "workspace", ".", "directory the agent's file and shell tools work in; its .deputy/ and .claude/ agents and skills are loaded")
	f.StringVar(&o.config, "config", "", "deputy.yaml with model tiers and prices (default: WORKSPACE/deputy.yaml, then ~/.deputy/deputy.yaml)")
	f.StringVar(&o.db, "db", "", dbFlagHelp)
	f.IntVar(&o.maxTurns, "max-turns", loop.DefaultMaxTurns, "maximum model calls of the root agent")
	f.IntVar(&o.maxDepth, "max-depth", agent.DefaultMaxDepth, "how deep subagents may nest (1: only the root spawns; 0: no subagents)")
	f.IntVar(&o.maxParallel, "max-parallel", agent.DefaultMaxParallel, "subagents of one parent running at once")
	f.Int64Var(&o.budget.Tokens, "budget-tokens", 0, "token budget for the whole tree of agents (0: none)")
	f.Float64Var(&o.budget.USD, "budget-usd", 0, "cost budget in USD for the whole tree (needs prices in deputy.yaml; 0: none)")
	f.BoolVar(&o.asJSON, "json", false, "print a JSON object: answer, stop_reason, usage, turns, tool_calls, cost, instances")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the answer: no progress and no cost table (stderr)")
	f.DurationVar(&o.drain, "drain-timeout", durable.DefaultDrain, drainFlagHelp)
	f.DurationVar(&o.timeout, "timeout", 0, "wall-time limit of the root agent (time spent asking or paused does not count; 0: none)")
	f.BoolVar(&o.detach, "detach", false, "record the run, print the root instance id and exit; a worker (deputy worker) runs it")
	f.StringVar(&o.searchURL, "search-url", os.Getenv("DEPUTY_SEARCH_URL"), "SearXNG-compatible JSON search API for web_search (default $DEPUTY_SEARCH_URL; without it the tool is absent)")
	return cmd
}

// runResult is the --json output.
type runResult struct {
	ID         string            `json:"id"`
	Answer     string            `json:"answer"`
	StopReason string            `json:"stop_reason"`
	Usage      llm.Usage         `json:"usage"` // the whole tree's
	Turns      int               `json:"turns"`
	ToolCalls  int               `json:"tool_calls"`
	Model      string            `json:"model"`
	Cost       *float64          `json:"cost"`      // USD for the tree; null when a model has no price
	Instances  []instance.Record `json:"instances"` // each its View, as the API shows it
	Error      string            `json:"error,omitempty"`
	// State is the root's: completed and the other ends, asking or
	// paused when the run stopped to wait (exit 4), or interrupted when
	// this process stopped before the run ended (exit 6: it resumes).
	State    string `json:"state"`
	Question string `json:"question,omitempty"`
	// Approval is the call the tree waits to have approved (exit 4).
	Approval *deputylib.Approval `json:"approval,omitempty"`
}

// runTask is deputy run: it runs task's tree until it ends, waits, or a
// signal stops this process (the run then stays resumable), prints how it
// stands and returns the exit that says so (runExit).
func runTask(ctx context.Context, o runOptions, task string, stdout, stderr io.Writer) error {
	spec, err := o.check(task)
	if err != nil {
		return err
	}
	drain := cmp.Or(o.drain, durable.DefaultDrain)
	prog := termui.NewProgress(stderr, o.style)
	// What the signals say goes above the status line, as progress does.
	ctx, hurry, release := stopSignals(ctx, prog.Writer(), drain, o.quiet)
	defer release()
	opts, err := o.options(spec, stderr, prog)
	if err != nil {
		return err
	}
	t := o.task(task)
	if o.detach {
		return detach(ctx, opts, t, stdout)
	}
	rt, err := deputylib.Open(ctx, opts)
	if err != nil {
		return openErr(err, opts.DB)
	}
	defer closeRuntime(rt, hurry, drain, o.quiet, stderr, "deputy")
	opened(rt, stderr, "deputy", o.quiet)

	if !o.quiet {
		prog.Start(clock.Real)
		defer prog.Stop()
	}
	id, err := rt.Start(ctx, t)
	if err != nil {
		return err
	}
	root, records, done, err := awaitRun(ctx, rt, id, o.db, hurry, drain)
	prog.Stop() // what follows is printed plainly, below the run's lines
	if err != nil {
		return err
	}
	defer done()
	// A signal cut the wait short: what is left to print is still owed.
	ctx = context.WithoutCancel(ctx)
	tree, err := records.List(ctx, store.Filter{Root: id})
	if err != nil {
		return err
	}
	var approval *deputylib.Approval
	if root.State == instance.Asking {
		approval, _ = records.Approval(ctx, id) // without it, the exit still says it waits
	}
	if err := o.print(ctx, stdout, stderr, spec, root, tree, records, approval); err != nil {
		return err
	}
	if approval != nil {
		return &exitError{code: exitWaiting, err: fmt.Errorf("%s waits for approval of a call: deputy approve %s [--always], "+
			"or deputy deny %s --reason TEXT", approval.InstanceID, id, id)}
	}
	return runExit(root, tree)
}

// check refuses flags that cannot make a run before anything is opened,
// as usage errors (exit 2), and resolves the root's model spec.
func (o runOptions) check(task string) (spec string, err error) {
	if strings.TrimSpace(task) == "" {
		return "", usageErr("the task is empty")
	}
	if o.maxTurns < 1 {
		return "", usageErr("--max-turns must be at least 1")
	}
	if o.maxParallel < 1 || o.maxDepth < 0 || o.budget.Tokens < 0 || o.budget.USD < 0 {
		return "", usageErr("--max-parallel must be at least 1; --max-depth and the budgets cannot be negative")
	}
	return rootSpec(o.model)
}

// options are the library's options for the run: the workspace, config
// and database the flags name, progress lines on stderr unless quiet, and
// the root's system prompt, which names the workspace it resolved.
func (o runOptions) options(spec string, stderr io.Writer, prog *termui.Progress) (deputylib.Options, error) {
	in := cliInputs{db: o.db, model: spec, scenario: o.scenario, workspace: o.workspace, config: o.config,
		searchURL: o.searchURL, stderr: stderr}
	if !o.quiet {
		in.onEvent = prog.OnEvent
	}
	opts, err := cliOptions(in)
	if err != nil {
		return opts, err
	}
	opts.System = fmt.Sprintf(rootSystemPrompt, opts.Workspace)
	return opts, nil
}

// task is the root's task with the flags' limits. The flags' "none" is
// not always the library's zero: see MaxDepth.
func (o runOptions) task(text string) deputylib.Task {
	maxDepth := o.maxDepth
	if maxDepth == 0 {
		maxDepth = -1 // the flag's 0 means none; the runner's 0 means its default
	}
	return deputylib.Task{Text: text, MaxTurns: o.maxTurns, MaxDepth: maxDepth, MaxParallel: o.maxParallel,
		Budget: o.budget, WallTime: o.timeout}
}

// detach records the run and queues it without an engine here: it needs
// no lock and works while a worker runs. The root's id is all it prints,
// for scripts to follow the run with.
func detach(ctx context.Context, opts deputylib.Options, t deputylib.Task, stdout io.Writer) error {
	id, err := deputylib.Enqueue(ctx, opts, t)
	if err != nil {
		return openErr(err, opts.DB)
	}
	fmt.Fprintln(stdout, id)
	return nil
}

// awaitRun waits for run id to stop and says where its records are then
// read. Stopped by a signal, or with the wait failed and the run still
// pending (the database out of reach for a while, say), the runtime
// drains, and the records say how the run stands after it; its store is
// closed with it, so they are read through one of the CLI's own, which
// done closes. A run that cannot resume (its workflow failed) is a
// failure.
func awaitRun(ctx context.Context, rt *deputylib.Runtime, id, db string, hurry context.Context, drain time.Duration) (
	root *instance.Record, records runRecords, done func(), err error) {
	root, err = rt.WaitRun(ctx, id)
	if err == nil {
		return root, rt, func() {}, nil
	}
	if ctx.Err() == nil {
		if ok, rerr := rt.Resumable(context.WithoutCancel(ctx), id); rerr != nil || !ok {
			return nil, nil, nil, &exitError{code: exitFailed, err: err}
		}
	}
	// The drain; the deferred closeRuntime, closing nothing more, says
	// how it went.
	_, _ = rt.CloseContext(hurry, drain)
	rd, _, err := openStore(context.WithoutCancel(ctx), db)
	if err != nil {
		return nil, nil, nil, err
	}
	if root, err = rd.GetInstance(context.WithoutCancel(ctx), id); err != nil {
		rd.Close()
		return nil, nil, nil, &exitError{code: exitFailed, err: fmt.Errorf("stopped; instance %s: %w", id, err)}
	}
	return root, storeRecords{rd}, func() { rd.Close() }, nil
}

// unfinished: the instance has not ended, and will go on when a worker
// resumes its run.
func unfinished(in *instance.Record) bool {
	return in.State == instance.Created || in.State == instance.Running
}

// print says how the run stands on stdout: --json's object, or the
// root's report and its question; with the cost table on stderr unless
// quiet.
func (o runOptions) print(ctx context.Context, stdout, stderr io.Writer, spec string, root *instance.Record,
	tree []*instance.Record, records runRecords, approval *deputylib.Approval) error {
	rows, usage, cost := instanceRows(tree)
	question := ""
	if root.State == instance.Asking && approval == nil {
		question, _ = records.Question(ctx, root.ID) // without it, the exit still says it asks
	}
	if o.asJSON {
		state := string(root.State)
		if unfinished(root) {
			state = "interrupted" // not an instance's state: stopped, resumable
		}
		return writeJSON(stdout, runResult{ID: root.ID, Answer: root.Report, StopReason: root.StopReason, Usage: usage,
			State: state, Question: question, Approval: approval, Turns: root.Turns, ToolCalls: root.ToolCalls, Model: spec,
			Instances: rows, Cost: cost, Error: root.Error})
	}
	if root.Report != "" {
		fmt.Fprintln(stdout, root.Report)
	}
	if question != "" {
		fmt.Fprintf(stdout, "%s asks: %s\n", root.ID, question)
	}
	if approval != nil {
		fmt.Fprintln(stdout, approvalLine(approval))
	}
	if !o.quiet && !setupFailed(root) {
		costTable(stderr, rows, usage, cost) // a setup error is one line, not a table of zeros
	}
	return nil
}

// runExit is the exit the run's end calls for: nil when it completed,
// else an exitError whose code tells scripts why it did not (waiting,
// interrupted, a setup error, a failure, a limit).
func runExit(root *instance.Record, tree []*instance.Record) error {
	id := root.ID
	switch {
	case unfinished(root):
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted, resumable: run %s is saved%s as of "+
			"its last finished step; deputy worker resumes it (deputy cancel %s ends it)", id, atWork(id, tree), id)}
	case root.State == instance.Asking:
		return &exitError{code: exitWaiting, err: fmt.Errorf("%s waits for an answer: deputy answer %s TEXT", id, id)}
	case root.State == instance.Paused:
		return &exitError{code: exitWaiting, err: fmt.Errorf("%s is paused: deputy resume %s", id, id)}
	case setupFailed(root):
		return &exitError{code: exitUsage, err: errors.New(root.Error)}
	case root.State == instance.Failed || root.State == instance.Cancelled:
		return &exitError{code: exitFailed, err: fmt.Errorf("run %s: %s", root.StopReason, root.Error)}
	case root.StopReason != string(loop.StopCompleted):
		return &exitError{code: exitLimited, err: fmt.Errorf("run stopped: %s after %d turns", root.StopReason, root.Turns)}
	}
	return nil
}

// atWork says, for an interrupted run, how many of its subagents were
// still at work: they resume with it.
func atWork(rootID string, tree []*instance.Record) string {
	active := 0
	for _, in := range tree {
		if in.ID != rootID && unfinished(in) {
			active++
		}
	}
	switch {
	case active == 1:
		return " with 1 subagent at work"
	case active > 1:
		return fmt.Sprintf(" with %d subagents at work", active)
	}
	return ""
}

// runRecords is where the records of a run that stopped are read: the
// runtime, or, once it has closed (a drain), a store of the CLI's own.
type runRecords interface {
	List(ctx context.Context, f deputylib.Filter) ([]*deputylib.Instance, error)
	Question(ctx context.Context, id string) (string, error)
	Approval(ctx context.Context, id string) (*deputylib.Approval, error)
}

// storeRecords reads a run's records from a store.
type storeRecords struct{ st *store.Store }

func (s storeRecords) List(ctx context.Context, f deputylib.Filter) ([]*deputylib.Instance, error) {
	return s.st.ListInstances(ctx, f)
}

func (s storeRecords) Question(ctx context.Context, id string) (string, error) {
	q, err := durable.Control{Store: s.st}.Question(ctx, id)
	if err != nil || q == nil {
		return "", err
	}
	return q.Body, nil
}

func (s storeRecords) Approval(ctx context.Context, id string) (*deputylib.Approval, error) {
	a, err := durable.Control{Store: s.st}.Waiting(ctx, id)
	if err != nil || a == nil {
		return nil, err
	}
	return &deputylib.Approval{InstanceID: a.InstanceID, CallID: a.CallID, Tool: a.Tool, Input: a.Input, Rule: a.Rule,
		Reason: a.Reason, AskedAt: a.AskedAt}, nil
}

// approvalLine says which call waits for approval: its tool, arguments and
// the rule (or why) that holds it.
func approvalLine(a *deputylib.Approval) string {
	why := a.Reason
	if a.Rule != "" {
		why = "rule " + a.Rule
	}
	return fmt.Sprintf("%s waits for approval: %s %s (%s)", a.InstanceID, a.Tool, string(a.Input), why)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON (for streams of records).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// isConfigMessage tells, from a run's recorded error, a failure of the
// setup (wrong key, unknown model, nothing listening at the endpoint) from
// a failure of the run, so scripts can react: the former exits 2 like any
// configuration error. The run's error crossed the store as text, so the
// check reads the provider's status as llm.APIError prints it.
func isConfigMessage(msg string) bool {
	return configFailure.MatchString(msg)
}

// setupFailed: the root failed on its first model call, before any tool
// ran, with an error of the setup kind. A connection dropped at turn 20 is
// a failure of the run, not of the setup.
func setupFailed(root *instance.Record) bool {
	return root.State == instance.Failed && root.Turns <= 1 && root.ToolCalls == 0 && isConfigMessage(root.Error)
}

var configFailure = regexp.MustCompile(`: (401|403|404) [a-z_]+|dial tcp|connection refused`)

// progress prints one line per tool call and per subagent start and end
// to w, so a person watching sees the agents work without the answer on
// stdout being mixed with it: plain text (see termui.Progress for a
// terminal's).
func progress(w io.Writer) func(agent.Event) {
	return termui.NewProgress(w, termui.Style{}).OnEvent
}

// instanceRows turns a tree's instances into rows, parents before their
// children, with the tree's usage and cost (nil when some model has no
// price).
func instanceRows(tree []*instance.Record) ([]instance.Record, llm.Usage, *float64) {
	kids := map[string][]*instance.Record{}
	var roots []*instance.Record
	for _, in := range tree {
		if in.Parent == "" {
			roots = append(roots, in)
		} else {
			kids[in.Parent] = append(kids[in.Parent], in)
		}
	}
	var rows []instance.Record
	var walk func(in *instance.Record)
	walk = func(in *instance.Record) {
		rows = append(rows, in.View())
		for _, k := range kids[in.ID] {
			walk(k)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	var u llm.Usage
	total, known := 0.0, true
	for _, r := range rows {
		u.Add(r.Usage)
		if r.Cost == nil {
			known = false
		} else {
			total += *r.Cost
		}
	}
	if !known {
		return rows, u, nil
	}
	return rows, u, &total
}

// costTable prints one row per instance of the tree, children indented
// under their parents, and the total.
func costTable(w io.Writer, rows []instance.Record, u llm.Usage, total *float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "instance\ttype\tmode\tstate\tturns\ttools\tin\tcached\tout\treport\tcost\t")
	for _, in := range rows {
		mode := in.Mode
		if mode == "" {
			mode = "-"
		}
		state := string(in.State)
		if in.Incomplete {
			state += "*"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", strings.Repeat("  ", in.Depth), in.ID,
			in.Type, mode, state, in.Turns, in.ToolCalls, in.Usage.InputTokens+in.Usage.CacheWriteTokens,
			in.Usage.CacheReadTokens, in.Usage.OutputTokens, utf8.RuneCountInString(in.Report), termui.CostCell(in.Cost))
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t\t%d\t%d\t%d\t\t%s\t\n", u.InputTokens+u.CacheWriteTokens, u.CacheReadTokens, u.OutputTokens, termui.CostCell(total))
	tw.Flush()
	termui.UnpricedHints(w, rows)
	if len(rows) > 0 && strings.HasPrefix(rows[0].Model, "fake") {
		fmt.Fprintln(w, "(the scripted model is priced at illustrative rates; * marks a partial result)")
	}
}
