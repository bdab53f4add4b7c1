package instance

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestStateTable: the table covers every active state, terminal states have
// no moves, and every move leads to a valid state. (Which moves exist is
// the store's conformance suite's to check, pair by pair, on both
// dialects.)
func TestStateTable(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		moves, ok := next[s]
		if s.Terminal() == ok {
			t.Errorf("state %s: terminal %v but has a row %v", s, s.Terminal(), ok)
		}
		for _, to := range moves {
			if !to.Valid() || to == s {
				t.Errorf("state %s moves to %q", s, to)
			}
		}
		if s.Active() == s.Terminal() {
			t.Errorf("state %s is both or neither active and terminal", s)
		}
		if s.Waiting() != (s == Asking || s == Paused) || s.Waiting() && !s.Active() {
			t.Errorf("state %s: waiting %v", s, s.Waiting())
		}
	}
	if State("nope").Valid() || State("nope").Active() || State("nope").Waiting() || CanMove("nope", Running) {
		t.Error("an unknown state is valid")
	}
}

func TestParseState(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		if got, err := ParseState(string(s)); err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "suspended", "skipped", "Running", "running "} {
		_, err := ParseState(bad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown state %q (the states: created, running, asking, paused, completed, failed, timed_out, cancelled)", bad)) {
			t.Errorf("ParseState(%q): %v, want an error listing the states", bad, err)
		}
	}
}

func TestMoveSaysWhyNot(t *testing.T) {
	t.Parallel()
	if err := Move("i-1", Running, Asking); err != nil {
		t.Fatalf("running → asking: %v", err)
	}
	cases := []struct {
		from, to State
		terminal bool
		says     string
	}{
		{Paused, Asking, false, "instance i-1: illegal state transition from paused to asking"},
		{Completed, Running, true, "it ended completed, and cannot become running"},
		{Running, "suspended", false, `"suspended" is not a state`},
		{Running, Running, false, "from running to running"},
	}
	for _, c := range cases {
		err := Move("i-1", c.from, c.to)
		var te *TransitionError
		if !errors.As(err, &te) || te.ID != "i-1" || te.From != c.from || te.To != c.to {
			t.Fatalf("%s → %s: %v is not a *TransitionError naming both", c.from, c.to, err)
		}
		if !errors.Is(err, ErrIllegalTransition) || errors.Is(err, ErrTerminal) != c.terminal ||
			!strings.Contains(err.Error(), c.says) {
			t.Errorf("%s → %s: %v", c.from, c.to, err)
		}
	}
}
