package clients

import (
	"path/filepath"
	"testing"
)

// matrix is one deputy binary and the installed clients, shared by every check.
type matrix struct {
	deputy  string // the built CLI
	node    string // the Node that runs the scripts
	modules string // clients/node_modules
}

// check is one row of docs/clients.md: a client doing one thing against the
// fake, with at least one tool round trip.
type check struct {
	name string
	run  func(t *testing.T, m *matrix)
}

// knownGaps are checks that fail because of a gap in the fake nobody has
// fixed yet: check name → what the fake does wrong. docs/clients.md marks
// each failing (TestDocsTableMatchesTheMatrix holds the two together).
// Locally such a check is skipped with its reason; under
// DEPUTY_REQUIRE_CLIENTS=1 (CI) it fails, since a skip there, reason or
// not, is a client the matrix stopped checking: CI is green only when every
// check runs and passes.
var knownGaps = map[string]string{}

func checks() []check {
	var all []check
	all = append(all, anthropicChecks()...)
	all = append(all, openaiChecks()...)
	all = append(all, aiSDKChecks()...)
	all = append(all, cliChecks()...)
	return all
}

func TestClients(t *testing.T) {
	node, modules := nodeTools(t)
	m := &matrix{deputy: buildDeputy(t, t.TempDir()), node: node, modules: modules}
	for _, c := range checks() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if why, ok := knownGaps[c.name]; ok {
				requireEnv(t, "known gap in the fake (docs/clients.md): %s", why)
			}
			c.run(t, m)
		})
	}
}

// script runs checks/NAME (with args) with the fake's address and key in
// its environment and returns its stdout.
func (m *matrix) script(t *testing.T, f *fakeLLM, name string, args ...string) string {
	t.Helper()
	dir, err := filepath.Abs("checks")
	if err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(t, f), "DEPUTY_CHECK_MARK="+mark)
	c := client{name: name, dir: dir, env: env, args: append([]string{m.node, name}, args...)}
	return c.run(t)
}
