package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exampleCommands are the deputy command lines in ex: each line's command
// from "deputy" on, cut before a pipe, a redirection, a process
// substitution's end or a comment, split into words (quotes as a shell
// reads them). A line that runs another program (curl) is none.
func exampleCommands(ex string) [][]string {
	var out [][]string
	for _, line := range strings.Split(ex, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "<(deputy "); i >= 0 {
			line = line[i+2:]
		}
		if !strings.HasPrefix(line, "deputy ") && line != "deputy" {
			continue
		}
		for _, cut := range []string{"  #", " | ", " > ", ")"} {
			if i := strings.Index(line, cut); i >= 0 && !inQuotes(line[:i]) {
				line = line[:i]
			}
		}
		out = append(out, shellWords(line))
	}
	return out
}

// inQuotes reports whether s leaves a double quote open.
func inQuotes(s string) bool { return strings.Count(s, `"`)%2 == 1 }

// shellWords splits s into words as a shell would, for the quoting the
// examples use (double and single quotes, no escapes).
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// runnableExamples are the commands whose examples the test runs for real
// (the others start servers or change what the rest read: their command
// lines are only parsed).
var runnableExamples = map[string]bool{
	"deputy": true, "show": true, "tree": true, "logs": true, "ps": true, "version": true, "doctor": true, "help": true,
	"completion": true, "completion bash": true, "completion zsh": true, "completion fish": true,
	"completion powershell": true, "agents": true, "agents list": true, "agents validate": true, "run": true, "prune": true,
}

// Every command has examples in its help, and each example is a command
// that works: its words parse (the command exists, its flags and
// arguments are accepted), and those that only read run for real, with a
// real instance's id for the example's.
func TestEveryCommandHasWorkingExamples(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	def := "---\nname: %s\ndescription: Reviews a change.\ntools: Read, Grep\n---\nYou review.\n"
	writeFile(t, filepath.Join(ws, ".claude", "agents", "reviewer.md"), fmt.Sprintf(def, "critic"))
	writeFile(t, filepath.Join(ws, ".deputy", "agents", "reviewer.md"), fmt.Sprintf(def, "reviewer"))
	var cmds []*cobra.Command
	walkCommands(newRoot(os.Stdout, os.Stderr), func(c *cobra.Command) {
		if !c.Hidden {
			cmds = append(cmds, c)
		}
	})
	ran := 0
	for _, c := range cmds {
		path := strings.TrimPrefix(c.CommandPath(), "deputy ")
		lines := exampleCommands(c.Example)
		if len(lines) == 0 {
			t.Errorf("%s: no example in its help (Example: %q)", c.CommandPath(), c.Example)
			continue
		}
		for _, words := range lines {
			args := words[1:]
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, exampleID, id)
			}
			if err := parses(args); err != nil {
				t.Errorf("%s: example %q does not parse: %v", path, strings.Join(words, " "), err)
				continue
			}
			line := strings.Join(args, " ")
			if !runnableExamples[path] || path == "prune" && !strings.Contains(line, "--dry-run") ||
				path == "run" && !strings.Contains(line, "--model fake") { // a real model needs an account
				continue
			}
			out, errOut, code := deputy(t, ws, nil, args...)
			if code != 0 {
				t.Errorf("%s: example %q: exit %d\n%s\n%s", path, strings.Join(words, " "), code, out, errOut)
			}
			ran++
		}
	}
	if ran < 20 {
		t.Errorf("ran only %d examples", ran)
	}
}

// parses checks that args name a command whose flags and arguments it
// accepts, on a CLI of its own (parsing changes a command's flags).
func parses(args []string) error {
	root := newRoot(os.Stdout, os.Stderr)
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if err := c.ValidateRequiredFlags(); err != nil {
		return err
	}
	return c.ValidateArgs(c.Flags().Args())
}

// internalWords are what a user's help must not say: issue numbers, the
// engine's and the library's own names.
var internalWords = regexp.MustCompile(`(?i)\bissue \d+|#\d+\b|\bDBOS\b|\bdurable\b|\bOptions\.|\bView\(|\bstoretest\b|\bcobra\b`)

// Help speaks to users: no command's texts or flags name an issue or
// deputy's insides.
func TestHelpSpeaksToUsers(t *testing.T) {
	t.Parallel()
	walkCommands(newRoot(os.Stdout, os.Stderr), func(c *cobra.Command) {
		texts := []string{c.Short, c.Long, c.Example}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, s := range texts {
			if m := internalWords.FindString(s); m != "" {
				t.Errorf("%s: its help says %q: %q", c.CommandPath(), m, s)
			}
		}
	})
}
