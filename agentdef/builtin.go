package agentdef

import "slices"

// OutputContract is what every built-in asks its child to end with, so the
// parent gets reports it can merge and check.
const OutputContract = `When you are done, reply with your report and nothing else, in this shape:

Conclusion: what you found or did, in a few lines.
Sources: the files, commands and pages you relied on.
Not verified: what you could not check, and why.

Keep the report short; the parent reads only the report.`

// Read-only and write tool sets, in deputy's names. The read-only types
// list ask_parent as well: an allowlist is exactly what it lists (see
// Definition.Tools), and an explorer or a reviewer stuck on a choice only
// its parent can make should ask, as it always could. The fixer, a fork
// carrying on the parent's own plan, could never ask and still does not.
var (
	readOnlyTools = []string{"read_file", "glob", "grep", "web_fetch", "web_search"}
	askingReader  = slices.Concat(readOnlyTools, []string{AskTool})
	writeTools    = []string{"read_file", "glob", "grep", "edit_file", "write_file", "bash"}
)

// Builtins returns fresh copies of deputy's built-in definitions, already
// checked. They are the lowest level of the catalog: a file with the same
// name replaces one.
func Builtins() []*Definition {
	defs := []*Definition{
		{
			Name: "general-purpose",
			Description: "General agent for multi-step tasks: research, searching code, and changes " +
				"that need several tools. Use when no more specific agent fits.",
			SystemPrompt: "You are a subagent working on one task for a parent agent. Work through it " +
				"with your tools, then report.\n\n" + OutputContract,
			// nil Tools: the parent's tools minus spawning, and ask_parent.
		},
		{
			Name: "explorer",
			Description: "Fast read-only search of the workspace and the web: finds files, definitions " +
				"and facts, and reports where they are. Cannot change anything.",
			SystemPrompt: "You are a read-only explorer. Find what the task asks for by reading, " +
				"globbing and grepping; never try to change files. Cite paths and line numbers.\n\n" +
				OutputContract,
			Tools: askingReader,
			Model: TierHaiku,
			Mode:  ModeIsolated,
		},
		{
			Name: "reviewer",
			Description: "Independent read-only review of a change or a claim: checks it against the " +
				"code and reports problems. Starts fresh, without the author's reasoning.",
			SystemPrompt: "You are a reviewer. You did not write the work under review and you do not " +
				"know the author's reasoning; judge only what you can read and check. Look for bugs, " +
				"missing cases and claims the code does not support. Do not change files.\n\n" +
				OutputContract,
			Tools:      askingReader,
			Mode:       ModeIsolated,
			ModePinned: true,
		},
		{
			Name: "fixer",
			Description: "Makes a focused change the parent has already worked out (a fix, an edit " +
				"across files), continuing from the parent's context. Can edit files and run commands.",
			SystemPrompt: "You are a fixer continuing the parent's work. Make the change the task " +
				"describes, keep it minimal, and check it (build, tests) before reporting. List every " +
				"file you changed under Sources.\n\n" + OutputContract,
			Tools: writeTools,
			Mode:  ModeFork,
		},
	}
	for _, d := range defs {
		d.Tools = append([]string(nil), d.Tools...) // callers may edit their copy
		d.Source = Source{Level: LevelBuiltin}
		if err := d.Validate(); err != nil {
			panic("agent: built-in definition is invalid: " + err.Error()) // a programming error, caught by tests
		}
	}
	return defs
}
