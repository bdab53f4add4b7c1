package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
)

// typeReasoning is the block type of a Responses reasoning item.
const typeReasoning = "reasoning"

// minOutputTokens is the smallest max_output_tokens the API takes.
const minOutputTokens = 16

// responseParams translates req into the Responses API's request.
func (m *Model) responseParams(req *llm.Request) (responses.ResponseNewParams, error) {
	// store false: see the file comment of responses.go.
	p := responses.ResponseNewParams{Model: m.model, Store: param.NewOpt(false)}
	if req.Model != "" {
		p.Model = req.Model
	}
	if p.Model == "" {
		return p, fmt.Errorf("no model name")
	}
	if len(req.StopSequences) > 0 {
		return p, fmt.Errorf("stop sequences %q: the Responses API has no stop parameter (use openai:%s for Chat Completions)", req.StopSequences, p.Model)
	}
	if encryptsReasoning(p.Model) {
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	if req.MaxTokens > 0 {
		// The API refuses fewer than 16 ("Invalid 'max_output_tokens':
		// integer below minimum value. Expected a value >= 16"), which a
		// nearly spent token budget asks for; 16 overshoots it by at most
		// 15 tokens instead of failing the call.
		p.MaxOutputTokens = param.NewOpt(int64(max(req.MaxTokens, minOutputTokens)))
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.System != "" {
		p.Instructions = param.NewOpt(req.System)
	}
	if err := m.responseTools(req, &p); err != nil {
		return p, err
	}
	// At most one item per block: an item is large (a pointer per kind of
	// item), so growing the slice would copy every one of them again.
	n := 0
	for i := range req.Messages {
		n += len(req.Messages[i].Content)
	}
	items := make(responses.ResponseInputParam, 0, n)
	for i := range req.Messages {
		var err error
		if items, err = appendItems(items, &req.Messages[i], &m.opts); err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	return p, nil
}

// encryptsReasoning reports whether requests for model ask for reasoning
// items' encrypted_content. Models that do not reason refuse it with a 400
// ("Encrypted content is not supported with this model.", param include:
// reported against gpt-4o in ShishirPatil/gorilla#1148 and
// OpenHands/software-agent-sdk#1208), so the families known not to reason
// go without; any other model, newer ones and OpenAI-compatible servers
// included, gets it.
func encryptsReasoning(model string) bool {
	m := strings.TrimPrefix(strings.ToLower(model), "ft:")
	for _, p := range []string{"gpt-4", "gpt-3.5", "chatgpt-", "gpt-5-chat"} {
		if strings.HasPrefix(m, p) {
			return false
		}
	}
	return true
}

// responseTools sets the request's function tools and tool choice.
func (m *Model) responseTools(req *llm.Request, p *responses.ResponseNewParams) error {
	if len(req.Tools) > 0 {
		p.Tools = make([]responses.ToolUnionParam, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name == "" {
				return fmt.Errorf("tool %d has no name", i)
			}
			schema, err := m.schema(t.InputSchema)
			if err != nil {
				return fmt.Errorf("tool %s: input schema: %w", t.Name, err)
			}
			// strict is sent false: omitted, the API makes it true, which
			// refuses any schema with an optional property or without
			// additionalProperties: false, as most tools' are.
			ft := &responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: param.NewOpt(false)}
			if t.Description != "" {
				ft.Description = param.NewOpt(t.Description)
			}
			p.Tools[i] = responses.ToolUnionParam{OfFunction: ft}
		}
		if req.ToolChoice.DisableParallel {
			p.ParallelToolCalls = param.NewOpt(false)
		}
	}
	mode := func(o responses.ToolChoiceOptions) responses.ResponseNewParamsToolChoiceUnion {
		return responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: param.NewOpt(o)}
	}
	switch req.ToolChoice.Type {
	case "":
	case "auto":
		p.ToolChoice = mode(responses.ToolChoiceOptionsAuto)
	case "none":
		p.ToolChoice = mode(responses.ToolChoiceOptionsNone)
	case "any":
		p.ToolChoice = mode(responses.ToolChoiceOptionsRequired)
	case "tool":
		if req.ToolChoice.Name == "" {
			return fmt.Errorf("tool choice %q needs a tool name", req.ToolChoice.Type)
		}
		p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: req.ToolChoice.Name}}
	default:
		return fmt.Errorf("unknown tool choice %q (want auto, any, none or tool)", req.ToolChoice.Type)
	}
	return nil
}

// appendItems translates one transcript message into input items, in the
// order of its blocks: consecutive texts make one message, each tool call
// a function_call, each result a function_call_output, each reasoning
// block its stored item. Other opaque blocks (an Anthropic thinking block
// in a transcript that changed provider) have no item here and are left
// out, as on Chat Completions.
func appendItems(items responses.ResponseInputParam, msg *llm.Message, opts *Options) (responses.ResponseInputParam, error) {
	if msg.Role != llm.User && msg.Role != llm.Assistant {
		return items, fmt.Errorf("unknown role %q", msg.Role)
	}
	var texts []string
	flush := func() {
		if len(texts) > 0 {
			items = append(items, textItem(msg.Role, texts))
			texts = texts[:0]
		}
	}
	for j := range msg.Content {
		b := &msg.Content[j]
		if b.Type == llm.TypeText {
			texts = append(texts, b.Text)
			continue
		}
		it, ok, err := blockItem(b, msg.Role, opts)
		if err != nil {
			return items, fmt.Errorf("block %d: %w", j, err)
		}
		if ok {
			flush()
			items = append(items, it)
		}
	}
	flush()
	return items, nil
}

// blockItem translates a block other than text; ok is false for a block
// the wire has no item for.
func blockItem(b *llm.Block, role llm.Role, opts *Options) (it responses.ResponseInputItemUnionParam, ok bool, err error) {
	switch b.Type {
	case llm.TypeToolUse:
		if role != llm.Assistant {
			return it, false, fmt.Errorf("tool_use in a %s message", role)
		}
		args, err := callArguments(b, opts)
		if err != nil {
			return it, false, err
		}
		return responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
			CallID: b.ID, Name: b.Name, Arguments: args}}, true, nil
	case llm.TypeToolResult:
		if role != llm.User {
			return it, false, fmt.Errorf("tool_result in a %s message", role)
		}
		// is_error has no field here: the result's text says it.
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: param.NewOpt(b.ToolUseID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(b.Text)}}}, true, nil
	case typeReasoning:
		if len(b.Raw) == 0 {
			return it, false, fmt.Errorf("reasoning block has no raw JSON to send")
		}
		// The SDK's encoder compacts an override and escapes nothing
		// else; Raw is stored compact (fromResponse), so the bytes on the
		// wire are the stored bytes.
		return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(b.Raw)), true, nil
	}
	return it, false, nil
}

// textItem is a message item of role holding texts: one string, or one
// input_text part each for a user's several (an assistant's are joined,
// as its turn was one message).
func textItem(role llm.Role, texts []string) responses.ResponseInputItemUnionParam {
	msg := &responses.EasyInputMessageParam{Role: responses.EasyInputMessageRole(role), Type: responses.EasyInputMessageTypeMessage}
	switch {
	case len(texts) == 1:
		msg.Content.OfString = param.NewOpt(texts[0])
	case role == llm.Assistant:
		msg.Content.OfString = param.NewOpt(strings.Join(texts, ""))
	default:
		parts := make(responses.ResponseInputMessageContentListParam, len(texts))
		for k, t := range texts {
			parts[k] = responses.ResponseInputContentParamOfInputText(t)
		}
		msg.Content.OfInputItemContentList = parts
	}
	return responses.ResponseInputItemUnionParam{OfMessage: msg}
}
