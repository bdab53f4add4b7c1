package fake

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestResponsesDrivenByAScenario: a YAML scenario answers on the
// Responses wire unchanged: its tool rule, its thinking as a reasoning
// item, and its turn-2 rule reading the function_call_output as a
// tool_result.
func TestResponsesDrivenByAScenario(t *testing.T) {
	t.Parallel()
	sc, err := ParseScenario([]byte(`
rules:
  - match: {turn: 1, tools: [get_weather]}
    thinking: "Look it up for {{.Task}}."
    tool_calls: [{name: get_weather, input: {city: Oslo}}]
  - match: {tool_result: "rain"}
    text: "Bring an umbrella: {{index .ToolResults 0}}"
`), "weather.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, url := srvStart(t, Options{Responder: sc})
	c := oaiClient(url)
	params := respParams("weather?")
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	params.Reasoning = shared.ReasoningParam{Summary: shared.ReasoningSummaryDetailed}
	_, first, _ := respCollect(t, c, params)
	if len(first.Output) != 2 || first.Output[0].AsReasoning().Summary[0].Text != "Look it up for weather?." {
		t.Fatalf("turn 1: %s", first.RawJSON())
	}
	call := first.Output[1].AsFunctionCall()
	out := responses.ResponseInputItemParamOfFunctionCallOutput("rain")
	out.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
	next := responses.ResponseNewParams{Model: "gpt-test", Tools: params.Tools, PreviousResponseID: param.NewOpt(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	second, err := c.Responses.New(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Bring an umbrella: rain" {
		t.Errorf("turn 2: %q", second.OutputText())
	}
}
