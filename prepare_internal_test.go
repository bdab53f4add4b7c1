package deputy

import (
	"testing"
)

// A program changing its Options after Open does not reach the runtime's
// copy (it would race with the runs reading it).
func TestPrepareKeepsItsOwnCopies(t *testing.T) {
	t.Parallel()
	o := Options{ModelSpec: "fake", Workspace: t.TempDir(), Offer: []string{"a"},
		Config: &Config{Tiers: map[string]string{"haiku": "fake"}}}
	p, err := prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Offer[0], o.Config.Tiers["haiku"] = "b", "openai:x"
	if p.o.Offer[0] != "a" || p.o.Config.Tiers["haiku"] != "fake" || p.o.Config == o.Config {
		t.Errorf("the runtime shares the program's options: %+v %+v", p.o.Offer, p.o.Config)
	}
}
