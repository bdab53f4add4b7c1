package fake

import (
	_ "embed"
	"fmt"
)

// demoYAML is the scenario `deputy run --model fake` plays offline.
//
//go:embed scenarios/demo.yaml
var demoYAML []byte

// DemoScenario returns a fresh copy of the embedded demo scenario: five
// turns of real tool calls on the workspace (glob and bash, write_file,
// edit_file, read_file) and a final answer quoting the task. Each call
// returns a new Scenario, so runs do not share times counters.
func DemoScenario() *Scenario {
	s, err := ParseScenario(demoYAML, "scenarios/demo.yaml")
	if err != nil {
		// The file is compiled into the binary and loaded by the tests, so
		// this is a build defect, not bad input.
		panic(fmt.Sprintf("fake: embedded demo scenario: %v", err))
	}
	return s
}
