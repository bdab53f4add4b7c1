package fake

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The Messages API's options around the answer: output_config (effort,
// structured-output format, task budget), the deprecated output_format,
// thinking (enabled, adaptive, between_tools, disabled) and
// context_management. Field sets are the SDKs' param types
// (anthropic-sdk-go v2.15.0 BetaOutputConfigParam,
// BetaThinkingConfigParamUnion, BetaContextManagementConfigParam); the fake
// validates them as the API does and answers as a model that honours them.

type anthOutputConfig struct {
	Effort     *string         `json:"effort"`
	Format     json.RawMessage `json:"format"`
	TaskBudget json.RawMessage `json:"task_budget"`
}

type anthOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type anthTaskBudget struct {
	Type      *string `json:"type"`
	Total     *int64  `json:"total"`
	Remaining *int64  `json:"remaining"`
}

// anthEfforts are output_config.effort's values, in the order the API
// lists them.
var anthEfforts = []string{"low", "medium", "high", "xhigh", "max"}

// anthEffortCheck validates an effort at path.
func anthEffortCheck(effort *string, path string) *wireError {
	if effort == nil {
		return nil
	}
	if slices.Contains(anthEfforts, *effort) {
		return nil
	}
	return invalid("%s: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'", path)
}

// anthOutput validates output_config and output_format and returns the
// JSON schema the answer must be valid against, or nil.
func anthOutput(w *anthWireRequest) (json.RawMessage, *wireError) {
	var schema json.RawMessage
	if !isNull(w.OutputConfig) {
		var oc anthOutputConfig
		if werr := anthDecodeAt(w.OutputConfig, "output_config", &oc); werr != nil {
			return nil, werr
		}
		if werr := anthEffortCheck(oc.Effort, "output_config.effort"); werr != nil {
			return nil, werr
		}
		if werr := anthTaskBudgetCheck(oc.TaskBudget); werr != nil {
			return nil, werr
		}
		s, werr := anthFormat(oc.Format, "output_config.format")
		if werr != nil {
			return nil, werr
		}
		schema = s
	}
	if !isNull(w.OutputFormat) {
		if schema != nil {
			return nil, invalid("output_format: cannot be combined with output_config.format; output_format is deprecated, use output_config.format")
		}
		return anthFormat(w.OutputFormat, "output_format")
	}
	return schema, nil
}

// anthFormat validates a json_schema output format at path and returns
// its schema. A schema the fake cannot answer (not a schema, a $ref out of
// the document, constraints nothing meets) is refused, as the API refuses
// a schema it cannot compile into a grammar.
func anthFormat(raw json.RawMessage, path string) (json.RawMessage, *wireError) {
	if isNull(raw) {
		return nil, nil
	}
	var f anthOutputFormat
	if werr := anthDecodeAt(raw, path, &f); werr != nil {
		return nil, werr
	}
	if f.Type != "json_schema" {
		return nil, invalid("%s.type: Input should be 'json_schema'", path)
	}
	if isNull(f.Schema) {
		return nil, invalid("%s.schema: Field required", path)
	}
	if f.Schema[0] != '{' {
		return nil, invalid("%s.schema: Input should be a valid dictionary", path)
	}
	if _, err := schemaReply(f.Schema, ""); err != nil {
		return nil, invalid("%s.schema: %v", path, err)
	}
	return f.Schema, nil
}

func anthTaskBudgetCheck(raw json.RawMessage) *wireError {
	if isNull(raw) {
		return nil
	}
	const path = "output_config.task_budget"
	var tb anthTaskBudget
	if werr := anthDecodeAt(raw, path, &tb); werr != nil {
		return werr
	}
	switch {
	case tb.Type != nil && *tb.Type != "tokens":
		return invalid("%s.type: Input should be 'tokens'", path)
	case tb.Total == nil:
		return invalid("%s.total: Field required", path)
	case *tb.Total < 1:
		return invalid("%s.total: Input should be greater than or equal to 1", path)
	case tb.Remaining != nil && (*tb.Remaining < 0 || *tb.Remaining > *tb.Total):
		return invalid("%s.remaining: Input should be between 0 and total", path)
	}
	return nil
}

// anthThinkingConfig is every thinking variant's fields; which are allowed
// depends on the type (anthThinkingFields).
type anthThinkingConfig struct {
	Type         string          `json:"type"`
	BudgetTokens *int64          `json:"budget_tokens"`
	Display      *string         `json:"display"`
	BlockBinding json.RawMessage `json:"block_binding"`
}

// anthThinkingFields are the fields each thinking type takes besides type.
var anthThinkingFields = map[string][]string{
	"enabled":       {"budget_tokens", "display", "block_binding"},
	"adaptive":      {"display", "block_binding"},
	"disabled":      {},
	"between_tools": {},
}

// anthThinkingCheck validates thinking; an enabled budget must fit under
// maxTokens (-1 for count_tokens, which has none).
func anthThinkingCheck(raw json.RawMessage, maxTokens int) *wireError {
	if isNull(raw) {
		return nil
	}
	var t anthThinkingConfig
	if raw[0] != '{' || json.Unmarshal(raw, &t) != nil {
		return invalid("thinking: Input should be a valid dictionary")
	}
	allowed, ok := anthThinkingFields[t.Type]
	if !ok {
		return invalid("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'adaptive', 'between_tools', 'disabled', 'enabled'", t.Type)
	}
	path := "thinking." + t.Type
	if werr := onlyFields(raw, path, append([]string{"type"}, allowed...)); werr != nil {
		return werr
	}
	if t.Display != nil && *t.Display != "summarized" && *t.Display != "omitted" && !(t.Type == "adaptive" && *t.Display == "updates") {
		return invalid("%s.display: Input should be 'summarized' or 'omitted'", path)
	}
	if !isNull(t.BlockBinding) {
		var bb struct {
			PrefixMismatchBehavior *string `json:"prefix_mismatch_behavior"`
		}
		if werr := anthDecodeAt(t.BlockBinding, path+".block_binding", &bb); werr != nil {
			return werr
		}
		if b := bb.PrefixMismatchBehavior; b != nil && *b != "error" && *b != "drop_block" {
			return invalid("%s.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'", path)
		}
	}
	if t.Type != "enabled" {
		return nil
	}
	if t.BudgetTokens == nil {
		return invalid("thinking.enabled.budget_tokens: Field required")
	}
	if *t.BudgetTokens < 1024 {
		return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
	}
	if maxTokens >= 0 && int64(maxTokens) <= *t.BudgetTokens {
		return invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
	}
	return nil
}

// onlyFields refuses a key of the object raw that names is missing from.
func onlyFields(raw json.RawMessage, path string, names []string) *wireError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return invalid("%s: Input should be a valid dictionary", path)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(names, k) {
			return invalid("%s.%s: Extra inputs are not permitted", path, k)
		}
	}
	return nil
}

// anthContextEdits are context_management's edit types.
var anthContextEdits = []string{"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}

// anthContextManagement validates context_management: a list of edits of
// known types (their parameters are the model's business and pass). It
// cannot be combined with compaction.
func anthContextManagement(w *anthWireRequest) (bool, *wireError) {
	if isNull(w.ContextManagement) {
		return false, nil
	}
	if !isNull(w.Compaction) {
		return false, invalid("compaction: cannot be combined with context_management")
	}
	var cm struct {
		Edits []json.RawMessage `json:"edits"`
	}
	if werr := anthDecodeAt(w.ContextManagement, "context_management", &cm); werr != nil {
		return false, werr
	}
	for i, raw := range cm.Edits {
		var e struct {
			Type string `json:"type"`
		}
		if raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
			return false, invalid("context_management.edits.%d: Input should be a valid dictionary", i)
		}
		if !slices.Contains(anthContextEdits, e.Type) {
			return false, invalid("context_management.edits.%d: Input tag '%s' found using 'type' does not match any of the expected tags: '%s'", i, e.Type, strings.Join(anthContextEdits, "', '"))
		}
	}
	return true, nil
}

// applySchema makes the answer's text JSON valid against output_format's
// schema, as constrained decoding does on the real API, with the shaper
// every wire shares (answerBySchema).
func applySchema(g *generation, schema json.RawMessage) error {
	if err := g.answerBySchema(schema); err != nil {
		return fmt.Errorf("fake: structured output: %w", err)
	}
	return nil
}

// anthThinkingOmitted reports whether a (validated) thinking config asks
// for display "omitted": "thinking content is redacted but a signature is
// returned for multi-turn continuity" (BetaThinkingConfigAdaptiveParam).
func anthThinkingOmitted(raw json.RawMessage) bool {
	var t anthThinkingConfig
	return !isNull(raw) && json.Unmarshal(raw, &t) == nil && t.Display != nil && *t.Display == "omitted"
}

// omitThinking empties the text of the answer's thinking blocks, keeping
// their signatures. Output tokens stay those of the whole thinking, which
// is still billed.
func omitThinking(g *generation) {
	for i := range g.content {
		b := &g.content[i]
		var th anthThinkingOut
		if b.Type != "thinking" || json.Unmarshal(b.Raw, &th) != nil {
			continue
		}
		th.Thinking = ""
		b.Raw = mustJSON(th)
	}
}
