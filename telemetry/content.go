package telemetry

import (
	"encoding/json"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// The message content attributes use the GenAI conventions' JSON shape:
// [{"role":"user","parts":[{"type":"text","content":"…"}]}], tool calls as
// {"type":"tool_call","id","name","arguments"}, their results as
// {"type":"tool_call_response","id","response"}. They are only ever built
// when content is opted in.

type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  *string         `json:"response,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

func partsOf(blocks []llm.Block) []part {
	ps := make([]part, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.TypeText:
			ps = append(ps, part{Type: "text", Content: b.Text})
		case llm.TypeToolUse:
			// The arguments as the model sent them; text that is not
			// JSON (a bad call's, a cut response's) goes as a JSON string.
			args := json.RawMessage(b.Arguments())
			if len(args) > 0 && !json.Valid(args) {
				args, _ = json.Marshal(string(args))
			}
			ps = append(ps, part{Type: "tool_call", ID: b.ID, Name: b.Name, Arguments: args})
		case llm.TypeToolResult:
			r := b.Text
			ps = append(ps, part{Type: "tool_call_response", ID: b.ToolUseID, Response: &r})
		default:
			// Blocks deputy carries opaquely: their kind only (a thinking
			// block's text sits in provider JSON next to its signature).
			typ := b.Type
			if strings.HasSuffix(typ, "thinking") {
				typ = "reasoning"
			}
			ps = append(ps, part{Type: typ})
		}
	}
	return ps
}

// messagesJSON renders msgs; finish, when set, is the last one's finish
// reason (an output message).
func messagesJSON(msgs []llm.Message, finish string) string {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, message{Role: string(m.Role), Parts: partsOf(m.Content)})
	}
	if finish != "" && len(out) > 0 {
		out[len(out)-1].FinishReason = finish
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]"
	}
	return string(b)
}

// textJSON is one message of one text part.
func textJSON(role llm.Role, text string) string {
	return messagesJSON([]llm.Message{{Role: role, Content: []llm.Block{llm.Text(text)}}}, "")
}
