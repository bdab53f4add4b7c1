package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// maxSkillFileRead bounds what the skill tool returns of one file.
const maxSkillFileRead = 256 << 10

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
	in, err := tool.Decode[struct {
		Name string `json:"name"`
		File string `json:"file"`
	}](raw)
	if err != nil {
		return "", err
	}
	n := nodeFrom(ctx)
	if n == nil {
		return "", errors.New("skill runs only inside a deputy agent run")
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
		var b strings.Builder
		fmt.Fprintf(&b, "# Skill %s\n\n%s\n", s.Name, strings.TrimSpace(s.Instructions))
		if len(s.Files) > 0 {
			b.WriteString("\nFiles of this skill (read one with the file argument):\n")
			for _, f := range s.Files {
				b.WriteString("- " + f + "\n")
			}
		}
		return b.String(), nil
	}
	return readSkillFile(s, in.File)
}

// readSkillFile reads a file under the skill's directory; os.Root keeps the
// name from escaping it (.., symlinks out).
func readSkillFile(s *agentdef.Skill, name string) (string, error) {
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSkillFileRead+1))
	if err != nil {
		return "", fmt.Errorf("skill %s: read %s: %w", s.Name, name, err)
	}
	out := string(data)
	if len(data) > maxSkillFileRead {
		out = tool.Truncate(out, maxSkillFileRead)
	}
	return out, nil
}
