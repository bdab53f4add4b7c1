// Command delegate is a parent agent with subagents: it hands two lookups
// to explorers that run in parallel, then answers from their reports. It
// runs offline, on deputy's scripted model.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/deputy-run/deputy"
)

//go:embed scenario.yaml
var scenario []byte

func main() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "deputy-delegate") // the database's; a real program keeps it
	defer os.RemoveAll(dir)
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Scenario: scenario, DB: filepath.Join(dir, "deputy.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	in, err := rt.Run(ctx, deputy.Task{Text: "Which formats do the parser and the writer use?"})
	if err != nil {
		log.Fatal(err)
	}
	kids, _ := rt.Children(ctx, in.ID)
	fmt.Printf("%s with %d subagents: %s\n", in.State, len(kids), in.Report)
}
