package agentdef

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/deputy-run/deputy/tool"
)

// What a definition means to a child run of it, beyond its fields: what
// deputy tells it besides the definition's own prompt (that it is a
// subagent, whose final answer is its report, within its cap), its
// granted skills as it reads them, and how far a spawn may tighten its
// fence.

// ForkTask is the user message a fork child of d starts on, granted
// skills, with task. Its instructions travel here rather than in the
// system prompt, which stays the parent's so the cached prefix holds.
func (d *Definition) ForkTask(skills []*Skill, task string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[deputy] You are now a subagent of type %s, forked from this conversation: you have its "+
		"history, but you work alone, and your final answer goes to the agent that started you as your report, "+
		"not to the user. Tool calls made in the same turn as your spawn run in the parent; their results are "+
		"not visible here.\n\n", d.Name)
	if s := strings.TrimSpace(d.SystemPrompt); s != "" {
		b.WriteString(s + "\n\n")
	}
	if len(skills) > 0 {
		// A fork cannot be offered the skill tool (the tool list is the
		// parent's), so its granted skills come inline.
		b.WriteString("Skills granted to you:\n")
		for _, s := range skills {
			fmt.Fprintf(&b, "\n## Skill %s\n%s\n", s.Name, strings.TrimSpace(s.Instructions))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Keep your report within %d characters.\n\nYour task:\n%s", d.ReportCap, task)
	return b.String()
}

// SubagentSystem is the system prompt of an isolated child of d (or a
// root run as d), granted skills: the definition's, then what deputy adds
// (the report's bound, the granted skills).
func (d *Definition) SubagentSystem(skills []*Skill) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(d.SystemPrompt))
	fmt.Fprintf(&b, "\n\nYou are a subagent: your final answer is your report to the agent that started you, "+
		"which sees nothing else of your work. Keep it within %d characters.", d.ReportCap)
	if len(skills) > 0 {
		b.WriteString("\n\nSkills you can load with the skill tool when a task needs one:\n")
		for _, s := range skills {
			b.WriteString("- " + s.Name + ": " + Brief(s.Description) + "\n")
		}
	}
	return strings.TrimSpace(b.String())
}

// Load is the skill as the skill tool loads it: its instructions, then
// the list of its files, which a child reads one at a time (ReadFile).
func (s *Skill) Load() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill %s\n\n%s\n", s.Name, strings.TrimSpace(s.Instructions))
	if len(s.Files) > 0 {
		b.WriteString("\nFiles of this skill (read one with the file argument):\n")
		for _, f := range s.Files {
			b.WriteString("- " + f + "\n")
		}
	}
	return b.String()
}

// maxSkillFileRead bounds what ReadFile returns of one file.
const maxSkillFileRead = 256 << 10

// ReadFile reads file name under the skill's directory; os.Root keeps the
// name from escaping it (.., symlinks out). A file over maxSkillFileRead
// is cut in its middle, saying how much (tool.Truncate).
func (s *Skill) ReadFile(name string) (string, error) {
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

// Looser reports whether i fences a child less than other does; from the
// loosest: none (or unset), sandbox, container. A spawn may tighten its
// type's isolation, never loosen it.
func (i Isolation) Looser(other Isolation) bool { return i.rank() < other.rank() }

func (i Isolation) rank() int {
	switch i {
	case IsolationSandbox:
		return 1
	case IsolationContainer:
		return 2
	}
	return 0
}
