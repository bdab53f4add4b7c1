package loop

import (
	"context"

	"github.com/deputy-run/deputy/llm"
)

// Call is what a running tool can learn about the call it serves. Most
// tools need none of it; the spawn tool needs the transcript to fork a
// child from and the call's id to cut out of it.
type Call struct {
	ID    string // the tool_use block's id
	Turn  int
	Index int // the call's place among its turn's calls, from 0
	// Transcript is the run's transcript up to and including the assistant
	// message that made the call, exactly as the model was last sent it. It
	// is shared with the run: read it, never write into it.
	Transcript []llm.Message
}

type callKey struct{}

// CallFrom returns the call a tool's context belongs to, when the tool runs
// inside a loop.
func CallFrom(ctx context.Context) (*Call, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	return c, ok
}

func withCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}
