package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/agent"
)

// maxPutFile bounds a definition file read by agents put.
const maxPutFile = 4 << 20

func newAgentsPutCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "put FILE...",
		Short: "Store definitions in the database, where every worker's catalog finds them (no restart)",
		Long: `Parses each Markdown definition file like "deputy agents validate" and stores it
in the database (--db), replacing one of the same name. Running workers pick it
up at their next catalog refresh (every 60 s). A file with errors is not stored,
and the command exits 2 after reporting every file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, _, err := openStore(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			bad := 0
			for _, file := range args {
				if err := putDefinition(cmd, file, func(name, source string, def []byte) error {
					return st.PutDefinition(ctx, name, source, def)
				}); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad++
				}
			}
			if bad > 0 {
				return usageErr("%d of %d files not stored", bad, len(args))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	return cmd
}

// putDefinition parses one file and stores it; every problem names the
// file and line.
func putDefinition(cmd *cobra.Command, file string, put func(name, source string, def []byte) error) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if len(data) > maxPutFile {
		return fmt.Errorf("%s: larger than %d bytes", file, maxPutFile)
	}
	p := agent.ParseDefinition(file, data)
	for _, w := range p.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", w)
	}
	if len(p.Errors) > 0 || p.Def == nil {
		msgs := make([]string, len(p.Errors))
		for i, e := range p.Errors {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%s", strings.Join(msgs, "\n"))
	}
	def, err := json.Marshal(p.Def)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := put(p.Def.Name, string(data), def); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "stored %s (%s)\n", p.Def.Name, file)
	return nil
}
