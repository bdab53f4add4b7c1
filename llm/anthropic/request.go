package anthropic

import (
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/deputy-run/deputy/llm"
)

// verbatim is JSON that must reach the wire as the exact bytes stored.
//
// The SDK's encoder re-compacts and HTML-escapes a json.RawMessage (so
// `{"q": "a<b"}` would go out as `{"q":"a\u003cb"}`), but passes any other
// json.Marshaler's output through untouched inside its param structs. A
// tool_use input must stay byte-identical to what the model produced, or
// the prompt-cache prefix of every later turn changes.
type verbatim []byte

func (v verbatim) MarshalJSON() ([]byte, error) { return v, nil }

// emptyObject is the input of a tool call without arguments.
var emptyObject = verbatim(`{}`)

// params translates req into the SDK's request.
func (m *Model) params(req *llm.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{Model: m.model}
	if req.Model != "" {
		p.Model = req.Model
	}
	if p.Model == "" {
		return p, fmt.Errorf("no model name")
	}
	p.MaxTokens = m.maxTokens(req)
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	if len(req.StopSequences) > 0 {
		p.StopSequences = req.StopSequences
	}
	p.Thinking = m.thinking()
	var err error
	if p.Tools, err = toolParams(req.Tools); err != nil {
		return p, err
	}
	if p.ToolChoice, err = toolChoice(req.ToolChoice); err != nil {
		return p, err
	}
	if p.Messages, err = messageParams(req.Messages); err != nil {
		return p, err
	}
	if !m.opts.NoCache {
		// The constructor sets type "ephemeral"; a bare struct literal is the
		// zero value, which the encoder omits.
		cc := sdk.NewCacheControlEphemeralParam()
		cc.TTL = m.ttl
		placeBreakpoints(&p, req, cc)
	}
	return p, nil
}

// maxTokens is the request's output cap: its own, else the model's
// option, else DefaultMaxTokens (the API requires one).
func (m *Model) maxTokens(req *llm.Request) int64 {
	switch {
	case req.MaxTokens > 0:
		return int64(req.MaxTokens)
	case m.opts.MaxTokens > 0:
		return int64(m.opts.MaxTokens)
	}
	return DefaultMaxTokens
}

// thinking is the model's thinking option: a fixed budget, adaptive, or
// none (the zero value, which the encoder omits).
func (m *Model) thinking() sdk.ThinkingConfigParamUnion {
	switch {
	case m.opts.ThinkingBudget > 0:
		return sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{BudgetTokens: m.opts.ThinkingBudget}}
	case m.opts.AdaptiveThinking:
		return sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
	}
	return sdk.ThinkingConfigParamUnion{}
}

// toolParams translates the tool specs; nil for none. A tool without a schema
// gets the empty object schema, which the API requires.
func toolParams(specs []llm.ToolSpec) ([]sdk.ToolUnionParam, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make([]sdk.ToolUnionParam, len(specs))
	for i := range specs {
		t := &specs[i]
		if t.Name == "" {
			return nil, fmt.Errorf("tool %d has no name", i)
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("tool %s: input schema is not valid JSON", t.Name)
		}
		tp := &sdk.ToolParam{Name: t.Name, InputSchema: param.Override[sdk.ToolInputSchemaParam](schema)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		out[i] = sdk.ToolUnionParam{OfTool: tp}
	}
	return out, nil
}

// messageParams translates the transcript, block by block.
func messageParams(msgs []llm.Message) ([]sdk.MessageParam, error) {
	out := make([]sdk.MessageParam, len(msgs))
	for i := range msgs {
		msg := &msgs[i]
		blocks := make([]sdk.ContentBlockParamUnion, len(msg.Content))
		for j := range msg.Content {
			b, err := block(&msg.Content[j])
			if err != nil {
				return nil, fmt.Errorf("message %d block %d: %w", i, j, err)
			}
			blocks[j] = b
		}
		switch msg.Role {
		case llm.User:
			out[i] = sdk.MessageParam{OfUser: &sdk.UserMessageParam{Content: blocks}}
		case llm.Assistant:
			out[i] = sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: blocks}}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	return out, nil
}

// block translates one transcript block.
func block(b *llm.Block) (sdk.ContentBlockParamUnion, error) {
	switch b.Type {
	case llm.TypeText:
		return sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: b.Text}}, nil
	case llm.TypeToolUse:
		in := emptyObject
		// A call whose arguments were not a JSON object (InvalidInput) goes
		// back as {}: the API refuses any other input, and the call's error
		// result, which quotes what the model sent, says why it failed.
		if len(b.Input) > 0 && b.InvalidInput == "" {
			if !json.Valid(b.Input) {
				return sdk.ContentBlockParamUnion{}, fmt.Errorf("tool_use %s (%s): input is not valid JSON", b.ID, b.Name)
			}
			in = verbatim(b.Input)
		}
		return sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{ID: b.ID, Name: b.Name, Input: in}}, nil
	case llm.TypeToolResult:
		r := &sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID}
		if b.IsError {
			r.IsError = param.NewOpt(true)
		}
		// The API refuses an empty text block; an empty result is sent
		// without content instead.
		if b.Text != "" {
			r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Text}}}
		}
		return sdk.ContentBlockParamUnion{OfToolResult: r}, nil
	}
	if len(b.Raw) == 0 {
		return sdk.ContentBlockParamUnion{}, fmt.Errorf("%s block has no raw JSON to send", b.Type)
	}
	// An opaque block (thinking, redacted_thinking, ...) goes back as its
	// stored JSON. The SDK re-encodes an override compact and HTML-escaped;
	// Raw is stored in exactly that form (see canonical), so the bytes on the
	// wire are the stored bytes.
	return param.Override[sdk.ContentBlockParamUnion](json.RawMessage(b.Raw)), nil
}

// toolChoice translates deputy's tool choice.
func toolChoice(tc llm.ToolChoice) (sdk.ToolChoiceUnionParam, error) {
	var u sdk.ToolChoiceUnionParam
	var noPar param.Opt[bool]
	if tc.DisableParallel {
		noPar = param.NewOpt(true)
	}
	switch tc.Type {
	case "":
		if tc.DisableParallel {
			u.OfAuto = &sdk.ToolChoiceAutoParam{DisableParallelToolUse: noPar}
		}
	case "auto":
		u.OfAuto = &sdk.ToolChoiceAutoParam{DisableParallelToolUse: noPar}
	case "any":
		u.OfAny = &sdk.ToolChoiceAnyParam{DisableParallelToolUse: noPar}
	case "none":
		u.OfNone = &sdk.ToolChoiceNoneParam{}
	case "tool":
		if tc.Name == "" {
			return u, fmt.Errorf("tool choice %q needs a tool name", tc.Type)
		}
		u.OfTool = &sdk.ToolChoiceToolParam{Name: tc.Name, DisableParallelToolUse: noPar}
	default:
		return u, fmt.Errorf("unknown tool choice %q (want auto, any, none or tool)", tc.Type)
	}
	return u, nil
}
