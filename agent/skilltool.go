package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
)

var skillSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","minLength":1,"description":"The skill's name, as listed in your instructions."},` +
	`"file":{"type":"string","description":"A file of the skill to read, as listed when the skill is loaded. Omit to load the skill's instructions."}` +
	`},"required":["name"],"additionalProperties":false}`)

// skillTool loads a granted skill's instructions and lists its files, or
// reads one of them. It serves a whole tree; which skills exist comes from
// the calling instance, so a skill not granted to it does not exist for it.
type skillTool struct{}

func (skillTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: agentdef.SkillTool, InputSchema: skillSchema,
		Description: "Load one of your skills: its instructions and the list of its files; or read one of those files."}
}

func (skillTool) ReadOnly() bool { return true }

func (skillTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	n, in, err := callInput[struct {
		Name string `json:"name"`
		File string `json:"file"`
	}](ctx, agentdef.SkillTool, raw)
	if err != nil {
		return "", err
	}
	var s *agentdef.Skill
	var names []string
	for _, g := range n.skills {
		names = append(names, g.Name)
		if g.Name == in.Name {
			s = g
		}
	}
	if s == nil {
		return "", fmt.Errorf("no skill %q is granted to you; your skills: %s", in.Name, strings.Join(names, ", "))
	}
	if in.File == "" {
		return s.Load(), nil
	}
	return s.ReadFile(in.File)
}
