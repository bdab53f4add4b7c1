package main

import "github.com/spf13/cobra"

// exampleID is the instance id the examples show: it looks like one
// ("i-" and 12 hex digits), and the test that runs every example puts a
// real one in its place.
const exampleID = "i-3f9c2a1b7d04"

// generatedExamples are the examples of the commands cobra makes (help,
// completion and its shells), which have none of their own, and of a
// command whose file has none yet (worker).
var generatedExamples = map[string]string{
	"help": `  deputy help run
  deputy help completion bash`,
	"completion": `  deputy completion bash > ~/.local/share/bash-completion/completions/deputy
  deputy completion zsh > "${fpath[1]}/_deputy"`,
	"completion bash": `  source <(deputy completion bash)                                           # this shell
  deputy completion bash > ~/.local/share/bash-completion/completions/deputy  # every new one`,
	"completion zsh": `  source <(deputy completion zsh)
  deputy completion zsh > "${fpath[1]}/_deputy"`,
	"completion fish": `  deputy completion fish | source
  deputy completion fish > ~/.config/fish/completions/deputy.fish`,
	"worker": `  deputy worker
  deputy worker --until-idle -q`,
	"completion powershell": `  deputy completion powershell | Out-String | Invoke-Expression`,
}

// addExamples gives the generated commands under root their examples.
func addExamples(root *cobra.Command) {
	for _, c := range root.Commands() {
		if ex, ok := generatedExamples[c.Name()]; ok && c.Example == "" {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			if ex, ok := generatedExamples[c.Name()+" "+sub.Name()]; ok && sub.Example == "" {
				sub.Example = ex
			}
		}
	}
}
