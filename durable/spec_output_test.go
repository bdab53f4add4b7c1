package durable_test

import (
	"testing"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
)

// ~10,000 output tokens in one answer: more than the default per-call cap.
const longAnswerScenario = `
rules:
  - text: '{{lorem 40000}}'
`

// Spec.MaxOutputTokens is the root's per-call output cap: the default cuts
// a long answer at max_tokens, a larger cap lets it through whole.
func TestSpecMaxOutputTokens(t *testing.T) {
	t.Parallel()
	r := newRig(t, longAnswerScenario, nil)
	cut := r.wait(r.start(durable.Spec{System: "root"}))
	if cut.StopReason != "max_output_tokens" || len(cut.Report) >= 40000 {
		t.Errorf("default cap: %s, stop %s, %d-character report", cut.State, cut.StopReason, len(cut.Report))
	}
	whole := r.wait(r.start(durable.Spec{System: "root", MaxOutputTokens: 16000}))
	if whole.State != instance.Completed || whole.StopReason != "completed" || len(whole.Report) != 40000 {
		t.Errorf("cap 16000: %s, stop %s, %d-character report", whole.State, whole.StopReason, len(whole.Report))
	}
}
