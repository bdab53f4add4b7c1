package fake

import (
	"encoding/json"

	"github.com/deputy-run/deputy/llm"
)

// The Responses API's output: the response object and its output items,
// in the shapes of the CreateResponse examples in openai/openai-openapi
// (openapi.yaml, "Create a model response", text and streaming).

type respObject struct {
	ID                   string            `json:"id"`
	Object               string            `json:"object"`
	CreatedAt            int64             `json:"created_at"`
	Status               string            `json:"status"`
	Background           bool              `json:"background"`
	CompletedAt          *int64            `json:"completed_at"`
	Error                *respErrorOut     `json:"error"`
	IncompleteDetails    *respIncomplete   `json:"incomplete_details"`
	Instructions         *string           `json:"instructions"`
	MaxOutputTokens      *int64            `json:"max_output_tokens"`
	MaxToolCalls         *int64            `json:"max_tool_calls"`
	Model                string            `json:"model"`
	Output               []json.RawMessage `json:"output"`
	ParallelToolCalls    bool              `json:"parallel_tool_calls"`
	PreviousResponseID   *string           `json:"previous_response_id"`
	PromptCacheKey       *string           `json:"prompt_cache_key"`
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	Reasoning            respReasoningEcho `json:"reasoning"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
	ServiceTier          string            `json:"service_tier"`
	Store                bool              `json:"store"`
	Temperature          float64           `json:"temperature"`
	Text                 json.RawMessage   `json:"text"`
	ToolChoice           json.RawMessage   `json:"tool_choice"`
	Tools                []json.RawMessage `json:"tools"`
	TopLogprobs          int               `json:"top_logprobs"`
	TopP                 float64           `json:"top_p"`
	Truncation           string            `json:"truncation"`
	Usage                *respUsage        `json:"usage"`
	User                 json.RawMessage   `json:"user"`
	Metadata             json.RawMessage   `json:"metadata"`
}

type respErrorOut struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respReasoningEcho struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type respUsage struct {
	InputTokens         int               `json:"input_tokens"`
	InputTokensDetails  respInputDetails  `json:"input_tokens_details"`
	OutputTokens        int               `json:"output_tokens"`
	OutputTokensDetails respOutputDetails `json:"output_tokens_details"`
	TotalTokens         int               `json:"total_tokens"`
}

type respInputDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type respOutputDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// respUsageOut renders usage as Chat Completions counts it (input_tokens
// is the whole prompt, cached tokens included), from the same generation.
func respUsageOut(g *generation) *respUsage {
	u := oaiUsageOut(g)
	return &respUsage{
		InputTokens: u.PromptTokens, InputTokensDetails: respInputDetails{CachedTokens: u.PromptTokensDetails.CachedTokens},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: respOutputDetails{ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens},
		TotalTokens: u.TotalTokens,
	}
}

// Output items.
type (
	respMessageOut struct {
		ID      string         `json:"id"`
		Type    string         `json:"type"`
		Status  string         `json:"status"`
		Role    string         `json:"role"`
		Content []respTextPart `json:"content"`
	}
	respTextPart struct {
		Type        string            `json:"type"`
		Annotations []json.RawMessage `json:"annotations"`
		Logprobs    []json.RawMessage `json:"logprobs"`
		Text        string            `json:"text"`
	}
	respCallOut struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		Arguments string `json:"arguments"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	}
	respCustomCallOut struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Input     string `json:"input"`
	}
	respReasoningOut struct {
		ID               string            `json:"id"`
		Type             string            `json:"type"`
		Summary          []respSummaryPart `json:"summary"`
		EncryptedContent *string           `json:"encrypted_content,omitempty"`
	}
	respSummaryPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

// respOutItem is one output item being produced: a message (consecutive
// text blocks, one part each), a function call, a reasoning item, or an
// item passed through whole.
type respOutItem struct {
	kind  string // "message", "function_call", "custom_tool_call", "reasoning" or "raw"
	id    string
	texts []string
	// block is the generation's block a function call, reasoning or raw
	// item stands for.
	block *llm.Block
	// summary is the reasoning summary text, sent only when asked for;
	// encrypted the encrypted_content, likewise.
	summary   []string
	encrypted *string
	raw       json.RawMessage
	status    string
	namespace string // a call's tool's namespace, if it has one
}

// respOutItems groups the generation's blocks into output items. Thinking
// blocks become reasoning items (their text the summary when the request
// asked for one); opaque blocks of another kind, which this wire has no
// form for, cost their time but are not sent.
func (s *Server) respOutItems(g *generation, d *respDecoded) []*respOutItem {
	var items []*respOutItem
	for i := range g.content {
		b := &g.content[i]
		var it *respOutItem
		switch b.Type {
		case llm.TypeText:
			if n := len(items); n > 0 && items[n-1].kind == "message" && i > 0 && g.content[i-1].Type == llm.TypeText {
				items[n-1].texts = append(items[n-1].texts, b.Text)
				continue
			}
			it = &respOutItem{kind: "message", id: s.newID("msg_", 48), texts: []string{b.Text}}
		case llm.TypeToolUse:
			it = &respOutItem{kind: "function_call", id: s.newID("fc_", 48), block: b}
			if d.custom[b.Name] {
				it.kind, it.id = "custom_tool_call", s.newID("ctc_", 48)
			}
			it.namespace = d.namespace[b.Name]
		case "thinking":
			text, ok := thinkingText(b.Raw)
			if !ok {
				continue
			}
			it = &respOutItem{kind: "reasoning", id: s.newID("rs_", 48), block: b}
			if d.summary != "" {
				it.summary = []string{text}
			}
			if d.encrypted {
				e := sealReasoning(text)
				it.encrypted = &e
			}
		case "reasoning":
			it = &respOutItem{kind: "raw", raw: b.Raw, block: b}
		default:
			continue
		}
		it.status = "completed"
		items = append(items, it)
	}
	if n := len(items); n > 0 && g.stop == llm.StopMaxTokens {
		items[n-1].status = "incomplete"
	}
	return items
}

// json renders the item finished (done) or as it opens (added: no
// content, arguments or summary yet).
func (it *respOutItem) json(done bool) json.RawMessage {
	status := it.status
	if !done {
		status = "in_progress"
	}
	switch it.kind {
	case "message":
		m := respMessageOut{ID: it.id, Type: "message", Status: status, Role: "assistant", Content: []respTextPart{}}
		if done {
			for _, t := range it.texts {
				m.Content = append(m.Content, textPart(t))
			}
		}
		return mustJSON(m)
	case "function_call":
		c := respCallOut{ID: it.id, Type: "function_call", Status: status, CallID: it.block.ID, Name: it.block.Name, Namespace: it.namespace}
		if done {
			c.Arguments = it.block.Arguments()
		}
		return mustJSON(c)
	case "custom_tool_call":
		c := respCustomCallOut{ID: it.id, Type: "custom_tool_call", CallID: it.block.ID, Name: it.block.Name, Namespace: it.namespace}
		if done {
			c.Input = it.block.Arguments()
		}
		return mustJSON(c)
	case "reasoning":
		r := respReasoningOut{ID: it.id, Type: "reasoning", Summary: []respSummaryPart{}}
		if done {
			for _, t := range it.summary {
				r.Summary = append(r.Summary, respSummaryPart{Type: "summary_text", Text: t})
			}
			r.EncryptedContent = it.encrypted
		}
		return mustJSON(r)
	}
	return it.raw
}

// textPart is an output_text part holding t.
func textPart(t string) respTextPart {
	return respTextPart{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: t}
}

// respRun is one response being produced.
type respRun struct {
	d       *respDecoded
	g       *generation
	id      string
	created int64
	items   []*respOutItem
}

// object renders the response: status "in_progress" with no output or
// usage while it streams, then completed (or incomplete, when
// max_output_tokens cut it) with everything.
func (r *respRun) object(status string, completedAt int64) *respObject {
	e := &r.d.echo
	o := &respObject{
		ID: r.id, Object: "response", CreatedAt: r.created, Status: status, Background: e.background,
		Instructions: e.instructions, MaxOutputTokens: e.maxOutput, Model: r.d.req.Model,
		Output: []json.RawMessage{}, ParallelToolCalls: e.parallel, PreviousResponseID: e.previous,
		PromptCacheRetention: e.promptCacheRetain,
		Reasoning:            respReasoningEcho{Effort: e.reasoningEffort, Summary: e.reasoningSummary},
		ServiceTier:          "default", Store: r.d.store, Temperature: e.temperature, Text: e.text,
		ToolChoice: e.toolChoice, Tools: e.tools, TopP: e.topP, Truncation: e.truncation,
		User: nullIfEmpty(e.user), Metadata: e.metadata,
	}
	if status == "in_progress" {
		return o
	}
	o.CompletedAt = &completedAt
	if status == "incomplete" {
		o.IncompleteDetails = &respIncomplete{Reason: "max_output_tokens"}
	}
	for _, it := range r.items {
		o.Output = append(o.Output, it.json(true))
	}
	o.Usage = respUsageOut(r.g)
	return o
}

// finalStatus is the status the finished response has.
func (r *respRun) finalStatus() string {
	if r.g.stop == llm.StopMaxTokens {
		return "incomplete"
	}
	return "completed"
}
