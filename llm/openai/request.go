package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
)

// params translates req into the SDK's request.
func (m *Model) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: m.model}
	if req.Model != "" {
		p.Model = req.Model
	}
	if p.Model == "" {
		return p, fmt.Errorf("no model name")
	}
	if req.MaxTokens > 0 {
		if m.opts.LegacyMaxTokens {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if len(req.StopSequences) > 0 {
		p.Stop = sdk.ChatCompletionNewParamsStopUnion{OfStringArray: req.StopSequences}
	}
	if len(req.Tools) > 0 {
		p.Tools = make([]sdk.ChatCompletionToolUnionParam, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name == "" {
				return p, fmt.Errorf("tool %d has no name", i)
			}
			schema, err := m.schema(t.InputSchema)
			if err != nil {
				return p, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
			}
			fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
			if t.Description != "" {
				fd.Description = param.NewOpt(t.Description)
			}
			p.Tools[i] = sdk.ChatCompletionToolUnionParam{OfFunction: &sdk.ChatCompletionFunctionToolParam{Function: fd}}
		}
		if req.ToolChoice.DisableParallel {
			p.ParallelToolCalls = param.NewOpt(false)
		}
	}
	switch req.ToolChoice.Type {
	case "":
	case "auto", "none":
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(req.ToolChoice.Type)}
	case "any":
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt("required")}
	case "tool":
		if req.ToolChoice.Name == "" {
			return p, fmt.Errorf("tool choice %q needs a tool name", req.ToolChoice.Type)
		}
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &sdk.ChatCompletionNamedToolChoiceParam{
			Function: sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice.Name}}}
	default:
		return p, fmt.Errorf("unknown tool choice %q (want auto, any, none or tool)", req.ToolChoice.Type)
	}

	msgs := make([]sdk.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfSystem: &sdk.ChatCompletionSystemMessageParam{
			Content: sdk.ChatCompletionSystemMessageParamContentUnion{OfString: param.NewOpt(req.System)}}})
	}
	for i := range req.Messages {
		var err error
		msgs, err = appendMessage(msgs, &req.Messages[i], &m.opts)
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
	}
	p.Messages = msgs
	return p, nil
}

// appendMessage translates one transcript message, which may become several
// wire messages: each tool_result is a message of role tool, and must come
// right after the assistant message that called it, so a user turn's tool
// results go first and its text after them.
func appendMessage(msgs []sdk.ChatCompletionMessageParamUnion, m *llm.Message, opts *Options) ([]sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.Assistant:
		a := &sdk.ChatCompletionAssistantMessageParam{}
		var text strings.Builder
		for j := range m.Content {
			b := &m.Content[j]
			switch b.Type {
			case llm.TypeText:
				text.WriteString(b.Text)
			case llm.TypeToolUse:
				args, err := callArguments(b, opts)
				if err != nil {
					return msgs, fmt.Errorf("block %d: %w", j, err)
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: b.ID, Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args}}})
			case llm.TypeToolResult:
				return msgs, fmt.Errorf("block %d: tool_result in an assistant message", j)
			}
		}
		if text.Len() > 0 || len(a.ToolCalls) == 0 {
			a.Content = sdk.ChatCompletionAssistantMessageParamContentUnion{OfString: param.NewOpt(text.String())}
		}
		return append(msgs, sdk.ChatCompletionMessageParamUnion{OfAssistant: a}), nil
	case llm.User:
		var texts []string
		for j := range m.Content {
			b := &m.Content[j]
			switch b.Type {
			case llm.TypeToolResult:
				msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfTool: &sdk.ChatCompletionToolMessageParam{
					ToolCallID: b.ToolUseID,
					Content:    sdk.ChatCompletionToolMessageParamContentUnion{OfString: param.NewOpt(b.Text)}}})
			case llm.TypeText:
				texts = append(texts, b.Text)
			case llm.TypeToolUse:
				return msgs, fmt.Errorf("block %d: tool_use in a user message", j)
			}
		}
		switch len(texts) {
		case 0:
		case 1:
			msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfUser: &sdk.ChatCompletionUserMessageParam{
				Content: sdk.ChatCompletionUserMessageParamContentUnion{OfString: param.NewOpt(texts[0])}}})
		default:
			parts := make([]sdk.ChatCompletionContentPartUnionParam, len(texts))
			for k, t := range texts {
				parts[k] = sdk.ChatCompletionContentPartUnionParam{OfText: &sdk.ChatCompletionContentPartTextParam{Text: t}}
			}
			msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfUser: &sdk.ChatCompletionUserMessageParam{
				Content: sdk.ChatCompletionUserMessageParamContentUnion{OfArrayOfContentParts: parts}}})
		}
		return msgs, nil
	}
	return msgs, fmt.Errorf("unknown role %q", m.Role)
}

// callArguments is a tool call's arguments string as it goes back, on
// either wire (a Chat Completions tool call's function.arguments, a
// Responses function_call item's arguments): the model's bytes, or, for
// arguments that were not a JSON object, {} unless
// Options.EchoInvalidArguments (see the option).
func callArguments(b *llm.Block, opts *Options) (string, error) {
	switch {
	case b.InvalidInput != "":
		if opts.EchoInvalidArguments {
			return b.InvalidInput, nil
		}
		return "{}", nil
	case len(b.Input) > 0:
		if !json.Valid(b.Input) {
			return "", fmt.Errorf("tool_use %s (%s): input is not valid JSON", b.ID, b.Name)
		}
		return string(b.Input), nil
	}
	return "{}", nil
}

// maxSchemas bounds the decoded-schema cache.
const maxSchemas = 1024

// schema returns a tool's input schema as the map the SDK wants, decoded
// once per distinct schema.
func (m *Model) schema(raw json.RawMessage) (shared.FunctionParameters, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	m.mu.Lock()
	s, ok := m.schemas[string(raw)]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	m.mu.Lock()
	if len(m.schemas) >= maxSchemas {
		// Tool sets that keep changing (MCP servers coming and going) must
		// not grow the cache without bound; starting over costs one decode
		// per schema.
		clear(m.schemas)
	}
	m.schemas[string(raw)] = s
	m.mu.Unlock()
	return s, nil
}
