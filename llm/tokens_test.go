package llm

import (
	"encoding/json"
	"testing"
)

func TestEstimateOutput(t *testing.T) {
	t.Parallel()
	content := []Block{
		Text("abcde"), // 2
		ToolUse("toolu_1", "glob", json.RawMessage(`{"pattern":"*"}`)),            // name 1 + input 4; the ID is not output
		Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"x"}`)), // 9
	}
	if got, want := EstimateOutput(content), 2+1+4+9; got != want {
		t.Errorf("EstimateOutput = %d, want %d", got, want)
	}
	if EstimateOutput(nil) != 0 {
		t.Error("no content costs tokens")
	}
	// Output carries no framing, so it is EstimateBlock minus its overhead,
	// block by block.
	for i := range content {
		if got, want := EstimateOutput(content[i:i+1]), EstimateBlock(&content[i])-perMessageTokens; got != want {
			t.Errorf("block %d: EstimateOutput %d, EstimateBlock without framing %d", i, got, want)
		}
	}
}
