package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Steps is the seam between the loop and how its steps are executed. The
// loop hands every model call and every turn's batch of tool calls to Steps;
// Direct just runs them, and the runtime runs them as durable, checkpointed
// steps (so it, not the loop, owns any concurrency the durable engine needs
// to know about).
type Steps interface {
	// Model performs one model call of a turn. purpose tells the turn's
	// main call from a compaction summary made in the same turn.
	Model(ctx context.Context, turn int, purpose StepPurpose, generate func(context.Context) (*llm.Response, error)) (*llm.Response, error)
	// Tools runs a batch, filling b.Results in call order; RunBatch does it.
	// An error fails the run (a tool's own failure is a result, not an error).
	Tools(ctx context.Context, turn int, b *Batch) error
}

// StepPurpose names what a model step is for.
type StepPurpose string

// Model step purposes.
const (
	StepGenerate StepPurpose = "generate"
	StepCompact  StepPurpose = "compact"
)

// Batch is one turn's tool calls.
type Batch struct {
	Calls []llm.Block // tool_use blocks, in the order the model made them
	// Parallel is true when there are several calls and every one may run
	// at the same time as the others (tool.Set.Concurrent).
	Parallel bool
	Results  []llm.Block // tool_result blocks, Results[i] answering Calls[i]

	set        *tool.Set
	limit      int
	turn       int
	transcript []llm.Message // for CallFrom
	gate       GateFunc      // nil: every call runs (a resumed run's approved calls)
	after      AfterFunc     // nil: results go back as the tools gave them
	// at is each call's index in its turn when the batch is not the whole
	// turn (a resumed run's approved calls); nil: the batch's own order.
	at []int
}

// ReadOnly reports whether call i's tool is read-only (unknown tools are: a
// call to one only earns an error). The runtime uses it for crash recovery:
// a read-only call may run again, a side-effecting one may not.
func (b *Batch) ReadOnly(i int) bool { return b.set.ReadOnly(b.Calls[i].Name) }

// Resumable reports whether call i may run again after a crash cut it
// short (tool.Set.Resumable).
func (b *Batch) Resumable(i int) bool { return b.set.Resumable(b.Calls[i].Name) }

// Run executes call i and returns its result, capped at the output limit.
// It never fails: unknown tools, invalid arguments and tool errors are error
// results for the model.
func (b *Batch) Run(ctx context.Context, i int) llm.Block {
	c := &b.Calls[i]
	if err := ctx.Err(); err != nil {
		return llm.ToolResult(c.ID, "not run: "+interruption(ctx), true)
	}
	if err := c.InputError(); err != nil {
		// Arguments that are not a JSON object (a local model's cut or
		// malformed call; see llm.ToolCall) are the model's mistake, not
		// the run's: it hears what it sent and why that cannot run, and
		// may call again. Running the tool with no arguments instead
		// would act on an intent it never expressed.
		return llm.ToolResult(c.ID, tool.Truncate(tool.BadArguments(c.Name, err, c.InvalidInput), b.limit), true)
	}
	index := i
	if b.at != nil {
		index = b.at[i]
	}
	call := &Call{ID: c.ID, Turn: b.turn, Index: index, Transcript: b.transcript}
	input := c.Input
	if b.gate != nil {
		if msg := b.set.Check(c.Name, c.Input); msg != "" {
			return llm.ToolResult(c.ID, tool.Truncate(msg, b.limit), true) // nothing to decide
		}
		held, in, ok := gated(ctx, b.gate, call, c)
		if !ok {
			return held
		}
		input = in
	}
	out, isErr := b.set.Call(withCall(ctx, call), c.Name, input)
	if ctx.Err() != nil && isErr {
		out = "interrupted: " + interruption(ctx) + "\n" + out
	}
	res := llm.ToolResult(c.ID, tool.Truncate(out, b.limit), isErr)
	if b.after != nil {
		res = b.after(ctx, call, c.Name, input, res)
	}
	return res
}

func interruption(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errWallTime) {
		return "the wall-time limit was reached"
	}
	return fmt.Sprint(context.Cause(ctx))
}

// RunBatch runs every call of b, concurrently when b.Parallel, and stores
// the results in call order.
func RunBatch(ctx context.Context, b *Batch) {
	if !b.Parallel {
		for i := range b.Calls {
			b.Results[i] = b.Run(ctx, i)
		}
		return
	}
	// The first call runs on this goroutine: one goroutine fewer to start
	// and to wake, which is most of the cost when the tools are quick.
	var wg sync.WaitGroup
	for i := 1; i < len(b.Calls); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Results[i] = b.Run(ctx, i)
		}()
	}
	b.Results[0] = b.Run(ctx, 0)
	wg.Wait()
}

// Direct runs steps as plain calls: an ephemeral run that nothing recovers.
type Direct struct{}

// Model calls generate.
func (Direct) Model(ctx context.Context, _ int, _ StepPurpose, generate func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	return generate(ctx)
}

// Tools runs the batch.
func (Direct) Tools(ctx context.Context, _ int, b *Batch) error {
	RunBatch(ctx, b)
	return nil
}

// StepReport is a model step that asks a finished run for its report again
// (a subagent's report over its size cap); see Ask.
const StepReport StepPurpose = "report"

// Ask makes one more model call on a finished run's transcript followed by
// question, through cfg's Steps, and returns the response without running
// any tool it asks for. The request repeats the run's system prompt and
// tools so it reuses the run's prompt cache. turn numbers the step (the
// run's turn count plus one). The usage is drawn from cfg.Budget; adding it
// to the run's own is the caller's business.
func Ask(ctx context.Context, cfg Config, msgs []llm.Message, question string, turn, maxTokens int) (*llm.Response, error) {
	if cfg.Model == nil {
		return nil, errors.New("loop: Config.Model is nil")
	}
	steps := cfg.Steps
	if steps == nil {
		steps = Direct{}
	}
	req := cfg.request(appendUserText(slices.Clip(msgs), question))
	req.MaxTokens = maxTokens
	resp, err := steps.Model(ctx, turn, StepReport, func(ctx context.Context) (*llm.Response, error) {
		return cfg.Model.Generate(ctx, req, nil)
	})
	if err == nil && resp == nil {
		err = errors.New("the model returned no response and no error")
	}
	if err != nil {
		return nil, err
	}
	if cfg.Budget != nil {
		cfg.Budget.Spend(cfg.ModelName, resp.Usage)
	}
	return resp, nil
}
