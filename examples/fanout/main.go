// Command fanout runs a planned batch of subagents from Go: two lookups in
// parallel, then a comparison that receives their reports, merged by a
// function of the program's own. It runs offline, on deputy's scripted
// model.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/deputy-run/deputy"
)

//go:embed scenario.yaml
var scenario []byte

func main() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "deputy-fanout") // the database's; a real program keeps it
	defer os.RemoveAll(dir)
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Scenario: scenario, DB: filepath.Join(dir, "deputy.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.FanOut(ctx, deputy.FanOut{
		Tasks: []deputy.FanTask{
			{ID: "parser", Type: "explorer", Task: "Which format does the parser read?"},
			{ID: "writer", Type: "explorer", Task: "Which format does the writer emit?"},
			{ID: "compare", Type: "explorer", Task: "Do they agree?", DependsOn: []string{"parser", "writer"}},
		},
		MergeFunc: func(rs []deputy.FanResult) (string, error) {
			var lines []string
			for _, r := range rs {
				lines = append(lines, fmt.Sprintf("%s (%s): %s", r.ID, r.State, r.Report))
			}
			return strings.Join(lines, "\n"), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Merged)
}
