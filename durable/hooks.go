package durable

import (
	"context"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
)

// RecordHook makes a hook's decision a named step of the instance's
// workflow (turn-N/hook-Stop, turn-0/hook-SessionStart, ...): a replay
// after a crash returns the recorded outcome and does not run the hook
// again. PreToolUse and PostToolUse hooks need no step of their own: they
// run inside the tool call's step, whose checkpointed result carries what
// they decided.
func (s *steps) RecordHook(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return runStep(s.e, dbos.From(s.wf, ctx), s.label, name, fn)
}

var _ agent.HookRecorder = (*steps)(nil)
