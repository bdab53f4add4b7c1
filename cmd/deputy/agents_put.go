package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/spf13/cobra"
)

// maxPutFile bounds a definition file read by agents put.
const maxPutFile = 4 << 20

func newAgentsPutCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "put FILE...",
		Short: "Store definitions in the database, where every worker's catalog finds them (no restart)",
		Long: `Parses each Markdown definition file like "deputy agents validate" and stores it
in the database (--db), replacing a stored one of the same name. Running workers
pick it up at their next catalog refresh (every 60 s).

All or nothing: every file is checked before any is stored. If one has errors,
or two of them define the same name (one would replace the other), nothing is
stored: each problem is reported with its file:line, and the command exits 2.`,
		Example: "  deputy agents put .deputy/agents/*.md\n  deputy agents put --db postgres://deputy@db/deputy reviewer.md",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defs, bad := checkDefinitions(cmd, args)
			if bad > 0 {
				return usageErr("%d of %d files not valid or named twice; nothing stored", bad, len(args))
			}
			// Opened only now, so a refused put creates no database either.
			ctx := cmd.Context()
			st, _, err := openStore(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			for i, d := range defs {
				if err := st.PutDefinition(ctx, d.name, d.source, d.def); err != nil {
					// The database failed, not a file: say what is stored.
					return fmt.Errorf("store %s: %w (%d of %d stored before it)", d.file, err, i, len(defs))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stored %s (%s)\n", d.name, d.file)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	return cmd
}

// checkedDefinition is a file that parsed, ready to store.
type checkedDefinition struct {
	file, name, source string
	line               int // of its name
	def                []byte
}

// checkDefinitions parses every file, printing warnings and every problem
// (with file:line) to stderr, and returns the definitions and how many
// files have problems. A name given by two files is a problem of the
// second: storing both would keep only the second, silently.
func checkDefinitions(cmd *cobra.Command, files []string) ([]checkedDefinition, int) {
	var defs []checkedDefinition
	byName := map[string]checkedDefinition{}
	bad := 0
	for _, file := range files {
		d, err := checkDefinition(cmd, file)
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), err)
			bad++
			continue
		}
		if first, dup := byName[d.name]; dup {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s:%d: name %q is also defined in %s:%d; one put stores one definition per name\n",
				d.file, d.line, d.name, first.file, first.line)
			bad++
			continue
		}
		byName[d.name] = d
		defs = append(defs, d)
	}
	return defs, bad
}

// checkDefinition parses one file; every problem names the file and line.
func checkDefinition(cmd *cobra.Command, file string) (checkedDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return checkedDefinition{}, err
	}
	if len(data) > maxPutFile {
		return checkedDefinition{}, fmt.Errorf("%s: larger than %d bytes", file, maxPutFile)
	}
	p := agentdef.ParseDefinition(file, data)
	for _, w := range p.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", w)
	}
	if len(p.Errors) > 0 || p.Def == nil {
		msgs := make([]string, len(p.Errors))
		for i, e := range p.Errors {
			msgs[i] = e.Error()
		}
		return checkedDefinition{}, fmt.Errorf("%s", strings.Join(msgs, "\n"))
	}
	def, err := json.Marshal(p.Def)
	if err != nil {
		return checkedDefinition{}, fmt.Errorf("%s: %w", file, err)
	}
	return checkedDefinition{file: file, name: p.Def.Name, source: string(data), line: p.Def.Source.Line, def: def}, nil
}
