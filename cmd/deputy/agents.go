package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/spf13/cobra"
)

func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List and check subagent definitions",
		Long: `Subagent definitions are Markdown files with YAML front matter (Claude Code's
.claude/agents format). Without PATHs, deputy reads the project's .deputy/agents
and .claude/agents, the user's ~/.deputy/agents, and its built-ins; with PATHs
(files or directories, searched recursively for *.md) it reads only those.

Front matter must be YAML. A one-line value YAML cannot read as written (an
unquoted ": " in a description) is read as text, as Claude Code reads it, with
a warning; anything else that is not YAML (an unclosed [ list, a key indented by
mistake, a key given twice) is an error at its file:line, and the file is not
loaded.`,
		Example: `  deputy agents list
  deputy agents validate .claude/agents
  deputy agents put .deputy/agents/reviewer.md`,
	}
	cmd.AddCommand(newAgentsListCmd(), newAgentsValidateCmd(), newAgentsPutCmd())
	return cmd
}

func newAgentsListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list [--json] [PATH...]",
		Short:   "Print every definition with every parsed field",
		Example: "  deputy agents list\n  deputy agents list --json .claude/agents",
		RunE: func(cmd *cobra.Command, paths []string) error {
			defs, res, err := loadAgents(paths)
			if err != nil {
				return err
			}
			// Problems go to stderr so the listing stays parseable.
			errs, _ := res.Issues()
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", e.Error())
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if defs == nil {
					defs = []*agentdef.Definition{}
				}
				return enc.Encode(defs)
			}
			for i, d := range defs {
				if i > 0 {
					fmt.Fprintln(out)
				}
				printDefinition(out, d)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of definitions")
	return cmd
}

func newAgentsValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "validate [PATH...]",
		Short:   "Check definition files: errors and warnings with file:line, then loaded N/M",
		Example: "  deputy agents validate\n  deputy agents validate .claude/agents/reviewer.md",
		RunE: func(cmd *cobra.Command, paths []string) error {
			_, res, err := loadAgents(paths)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, e := range res.Errors {
				fmt.Fprintln(out, "error:", e.Error())
			}
			for _, f := range res.Files {
				for _, e := range f.Errors {
					fmt.Fprintln(out, "error:", e.Error())
				}
				for _, w := range f.Warnings {
					fmt.Fprintln(out, "warning:", w.Error())
				}
			}
			fmt.Fprintf(out, "loaded %d/%d\n", res.Loaded(), len(res.Files))
			if res.Loaded() != len(res.Files) || len(res.Errors) > 0 {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
}

// loadAgents reads the given paths, or the catalog (project, user and
// built-ins) when there are none.
func loadAgents(paths []string) ([]*agentdef.Definition, *agentdef.LoadResult, error) {
	if len(paths) > 0 {
		res := agentdef.ParsePaths(paths)
		var defs []*agentdef.Definition
		for _, f := range res.Files {
			if f.Def != nil {
				defs = append(defs, f.Def)
			}
		}
		return defs, res, nil
	}
	// The project is the working directory; "." keeps the paths in
	// messages short and relative to it.
	opts := agentdef.LoadOptions{ProjectDir: "."}
	if dir, err := agentdef.UserAgentsDir(); err == nil {
		opts.UserDir = dir
	}
	c, res := agentdef.Load(opts)
	return c.List(), res, nil
}

func printDefinition(w io.Writer, d *agentdef.Definition) {
	src := d.Source.Level.String()
	if d.Source.File != "" {
		src += " " + d.Source.File
		if d.Source.Line > 0 {
			src += fmt.Sprintf(":%d", d.Source.Line)
		}
	}
	tools := "(the parent's tools minus " + agentdef.SpawnTool + ")"
	if d.Tools != nil {
		tools = "[" + strings.Join(d.Tools, ", ") + "]"
	}
	model := d.Model
	if model == "" {
		model = "(inherit)"
	}
	mode := string(d.Mode)
	if d.ModePinned {
		mode += " (pinned)"
	}
	line := func(k, v string) { fmt.Fprintf(w, "  %-17s %s\n", k+":", v) }
	list := func(k string, v []string) {
		if len(v) > 0 {
			line(k, strings.Join(v, ", "))
		}
	}
	fmt.Fprintln(w, d.Name)
	line("description", d.Description)
	line("source", src)
	line("model", model)
	line("mode", mode)
	line("tools", tools)
	if d.DeclaredTools != nil {
		line("declared tools", "["+strings.Join(d.DeclaredTools, ", ")+"]")
	}
	list("unresolved tools", d.UnresolvedTools())
	list("disallowed tools", d.DisallowedTools)
	list("skills", d.Skills)
	if d.ToolChoice != "" {
		line("tool choice", d.ToolChoice)
	}
	line("max turns", fmt.Sprint(d.MaxTurns))
	if d.PermissionMode != "" {
		line("permission mode", string(d.PermissionMode))
	}
	if d.Hooks != nil {
		v, _ := json.Marshal(d.Hooks.Value)
		line("hooks", fmt.Sprintf("%s (line %d)", v, d.Hooks.Line))
	}
	line("isolation", string(d.Isolation))
	if d.Worktree {
		line("worktree", "true")
	}
	list("network", d.Network)
	list("read paths", d.ReadPaths)
	list("write paths", d.WritePaths)
	b := d.Budgets
	if b != (agentdef.Budgets{}) {
		line("budgets", fmt.Sprintf("total tokens %d, wall time %v, tool calls %d, output tokens per call %d (0 = no limit)",
			b.TotalTokens, b.WallTime, b.ToolCalls, b.OutputTokensPerCall))
	}
	line("report cap", fmt.Sprint(d.ReportCap))
	if d.Background {
		line("background", "true")
	}
	keys := make([]string, 0, len(d.Extra))
	for k := range d.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := json.Marshal(d.Extra[k])
		line("extra "+k, string(v))
	}
	prompt := d.SystemPrompt
	if len(prompt) > 80 {
		prompt = strings.ToValidUTF8(prompt[:80], "") + "..."
	}
	line("system prompt", fmt.Sprintf("%d chars: %q", len(d.SystemPrompt), prompt))
}
