package loop

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// counted is a side-effecting tool that counts its runs and echoes its
// input.
func counted(name string, n *atomic.Int32) fn {
	return fn{name: name, run: func(_ context.Context, in json.RawMessage) (string, error) {
		n.Add(1)
		return name + ":" + string(in), nil
	}}
}

// gateBy decides by tool name: "deny" and "ask" tools are refused and
// held, "rewrite" runs with other input, the rest run.
func gateBy(seen *[]string) GateFunc {
	return func(_ context.Context, c *Call, name string, in json.RawMessage) GateResult {
		*seen = append(*seen, c.ID+" "+name+" "+string(in))
		switch name {
		case "deny":
			return GateResult{Verdict: GateDeny, Reason: "not here", Rule: "deny(*)"}
		case "ask":
			return GateResult{Verdict: GateAsk, Reason: "someone must say yes", Rule: "Ask(*)"}
		case "rewrite":
			return GateResult{Verdict: GateAllow, Input: json.RawMessage(`{"x":"rewritten"}`)}
		}
		return GateResult{}
	}
}

// The gate decides each call after its arguments are checked: allowed
// calls run (with the rewritten input when it gives one, the transcript
// keeping the model's), denied ones are error results with the reason and
// rule and never run, and held ones wait as Held while the rest of the
// turn runs; then the run suspends.
func TestGateAllowDenyAskAndUpdatedInput(t *testing.T) {
	t.Parallel()
	var runs [4]atomic.Int32
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("ok", `{"a":1}`, "deny", `{}`, "rewrite", `{"x":"model"}`, "ask", `{"q":1}`, "ok", `not json`), say("never")}}
	var seen []string
	res, err := Run(context.Background(), Config{Model: m, Gate: gateBy(&seen),
		Tools: tool.MustSet(counted("ok", &runs[0]), counted("deny", &runs[1]), counted("rewrite", &runs[2]), counted("ask", &runs[3]))},
		task("go"))
	if err != nil || res.StopReason != StopSuspended || len(m.requests()) != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(seen) != 4 {
		t.Errorf("the gate saw %q: a call with malformed arguments must not reach it", seen)
	}
	p := res.Pending.Content
	want := []struct {
		text  string
		isErr bool
	}{{`ok:{"a":1}`, false}, {"permission denied: not here (rule deny(*))", true}, {`rewrite:{"x":"rewritten"}`, false},
		{Held, false}, {"", true}}
	for i, w := range want {
		if w.text != "" && p[i].Text != w.text || p[i].IsError != w.isErr {
			t.Errorf("result %d = %q (error %v), want %q (error %v)", i, p[i].Text, p[i].IsError, w.text, w.isErr)
		}
	}
	if runs[0].Load() != 1 || runs[1].Load() != 0 || runs[2].Load() != 1 || runs[3].Load() != 0 {
		t.Errorf("runs ok %d deny %d rewrite %d ask %d", runs[0].Load(), runs[1].Load(), runs[2].Load(), runs[3].Load())
	}
	if in := string(res.Messages[1].Content[2].Input); in != `{"x":"model"}` {
		t.Errorf("the transcript's call holds %s, want the model's own arguments", in)
	}
	held := HeldCalls(res.Messages[len(res.Messages)-1], res.Pending)
	if len(held) != 1 || held[0].Name != "ask" {
		t.Errorf("held calls %+v", held)
	}
}

// A turn with nothing held goes on as before: a deny alone is a result the
// model reads and answers.
func TestGateDenyDoesNotSuspend(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("deny", `{}`), say("understood")}}
	var seen []string
	res, err := Run(context.Background(), Config{Model: m, Gate: gateBy(&seen), Tools: tool.MustSet(counted("deny", &n))}, task("go"))
	if err != nil || res.StopReason != StopCompleted || res.Answer != "understood" || n.Load() != 0 {
		t.Fatalf("res %+v err %v runs %d", res, err, n.Load())
	}
	if got := m.requests()[1].Messages[2].Content[0]; !got.IsError || !strings.Contains(got.Text, "not here") {
		t.Errorf("the model read %+v", got)
	}
}

// A resumed run decides the held calls before its first model call: the
// approved ones run once, through Steps.Tools as a batch of their own
// (the gate is not asked again), the denied ones get the reason, one in
// neither list is refused, and the results the suspended run had stay.
func TestResumeRunsExactlyTheApprovedCalls(t *testing.T) {
	t.Parallel()
	var okRuns, askRuns atomic.Int32
	tools := tool.MustSet(counted("ok", &okRuns), counted("ask", &askRuns))
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){
		call("ask", `{"n":1}`, "ok", `{}`, "ask", `{"n":2}`, "ask", `{"n":3}`), say("done")}}
	var seen []string
	first, err := Run(context.Background(), Config{Model: m, Gate: gateBy(&seen), Tools: tools}, task("go"))
	if err != nil || first.StopReason != StopSuspended || askRuns.Load() != 0 {
		t.Fatalf("first run %+v err %v", first, err)
	}
	held := HeldCalls(first.Messages[len(first.Messages)-1], first.Pending)
	if len(held) != 3 {
		t.Fatalf("held %+v", held)
	}
	steps := &recordingSteps{}
	var gated []string
	second, err := Run(context.Background(), Config{Model: m, Gate: gateBy(&gated), Tools: tools, Steps: steps,
		Resume: &Resume{Pending: first.Pending, Approved: []string{held[2].ID}, Denied: map[string]string{held[0].ID: "too risky"}, Turn: 1}},
		first.Messages)
	if err != nil || second.StopReason != StopCompleted || second.Answer != "done" {
		t.Fatalf("second run %+v err %v", second, err)
	}
	if askRuns.Load() != 1 || okRuns.Load() != 1 || len(gated) != 0 {
		t.Errorf("ask ran %d times, ok %d, gate asked %q", askRuns.Load(), okRuns.Load(), gated)
	}
	if len(steps.log) < 2 || steps.log[0] != "tool 0 ask ro=false parallel=false" || steps.log[1] != "model 1 generate" {
		t.Errorf("steps %q", steps.log)
	}
	results := second.Messages[2].Content
	checkTranscript(t, second.Messages)
	if results[0].Text != "permission denied: too risky" || !results[0].IsError ||
		results[1].Text != "ok:{}" ||
		results[2].Text != "permission denied: the call was not approved" || !results[2].IsError ||
		results[3].Text != `ask:{"n":3}` || results[3].IsError {
		t.Errorf("results %+v", results)
	}
	if reqs := m.requests(); len(reqs) != 2 || len(reqs[1].Messages) != 3 {
		t.Errorf("the resumed run's model call saw %d messages", len(reqs[1].Messages))
	}
}

// Resume needs the transcript of the suspended run: one that does not end
// with the model's turn is a step error, not a guess.
func TestResumeNeedsTheSuspendedTurn(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){say("never")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(),
		Resume: &Resume{Pending: &llm.Message{Role: llm.User}}}, task("go"))
	if err == nil || res.StopReason != StopStepError || len(m.requests()) != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
}
