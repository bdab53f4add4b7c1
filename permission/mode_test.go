package permission

import (
	"strings"
	"testing"
)

func mustRules(t testing.TB, texts ...string) []Rule {
	t.Helper()
	out := make([]Rule, len(texts))
	for i, s := range texts {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = r
	}
	return out
}

func TestDecidePrecedence(t *testing.T) {
	t.Parallel()
	s := Set{
		Allow: mustRules(t, "Bash(aws s3 ls)", "Bash(git:*)", "Read"),
		Ask:   mustRules(t, "Bash(git push:*)"),
		Deny:  mustRules(t, "Bash(aws *)", "Read(.env)"),
	}
	for _, tc := range []struct {
		c    Call
		want Outcome
		rule string
	}{
		{call("bash", cmd("aws s3 ls")), Deny, "Bash(aws *)"},
		{call("bash", cmd("git push origin")), Ask, "Bash(git push:*)"},
		{call("bash", cmd("git status")), Allow, "Bash(git:*)"},
		{call("bash", cmd("git status && git log")), Allow, "Bash(git:*)"},
		{call("bash", cmd("git status && aws s3 ls")), Deny, "Bash(aws *)"},
		{call("bash", cmd("make")), Default, ""},
		{call("read_file", file(".env")), Deny, "Read(.env)"},
		{call("read_file", file("main.go")), Allow, "Read"},
	} {
		d := s.Decide(tc.c)
		if d.Outcome != tc.want || d.Rule != tc.rule {
			t.Errorf("%s %s: got %v %q, want %v %q", tc.c.Tool, tc.c.Input, d.Outcome, d.Rule, tc.want, tc.rule)
		}
	}
}

func TestCompoundAllowNamesEachRule(t *testing.T) {
	t.Parallel()
	s := Set{Allow: mustRules(t, "Bash(npm run build)", "Bash(npm test:*)")}
	d := s.Decide(call("bash", cmd("npm run build && npm test -- -u")))
	if d.Outcome != Allow || d.Rule != "Bash(npm run build), Bash(npm test:*)" {
		t.Errorf("got %v %q", d.Outcome, d.Rule)
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if m, err := ParseMode("manual"); err != nil || m != ModeDefault {
		t.Errorf("ParseMode(manual) = %q, %v", m, err)
	}
	_, err := ParseMode("yolo")
	if err == nil || !strings.Contains(err.Error(), `"yolo"`) || !strings.Contains(err.Error(), "bypassPermissions") {
		t.Errorf("ParseMode(yolo): %v; want the value and the list", err)
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	set := Set{
		Allow: mustRules(t, "Bash(go test:*)", "Edit(/docs/**)"),
		Ask:   mustRules(t, "Read(/private/**)"),
		Deny:  mustRules(t, "Bash(rm:*)", "Read(.env)"),
	}
	read := call("read_file", file("main.go"))
	readOut := call("read_file", file("/etc/hosts"))
	readAsk := call("read_file", file("/home/u/proj/private/x"))
	env := call("read_file", file(".env"))
	edit := call("edit_file", file("x.go"))
	editOut := call("write_file", file("/tmp/x"))
	editGit := call("write_file", file("/home/u/proj/.git/config"))
	editAgents := call("write_file", file("/home/u/proj/.claude/agents/a.md"))
	editDocs := call("write_file", file("/home/u/proj/docs/a.md"))
	test := call("bash", cmd("go test ./..."))
	other := call("bash", cmd("make"))
	rm := call("bash", cmd("rm -rf /"))
	mcp := call("mcp__db__query", nil)
	web := call("web_fetch", fetch("https://example.com"))

	type want map[*Call]Outcome
	for _, tc := range []struct {
		mode Mode
		want want
	}{
		{ModeDefault, want{&read: Allow, &readOut: Ask, &readAsk: Ask, &env: Deny, &edit: Ask, &editOut: Ask, &editGit: Ask,
			&editDocs: Allow, &test: Allow, &other: Ask, &rm: Deny, &mcp: Ask, &web: Ask}},
		{ModeAcceptEdits, want{&read: Allow, &edit: Allow, &editOut: Ask, &editGit: Ask, &editAgents: Allow,
			&editDocs: Allow, &test: Allow, &other: Ask, &rm: Deny, &mcp: Ask}},
		{ModePlan, want{&read: Allow, &readOut: Ask, &readAsk: Ask, &env: Deny, &edit: Deny, &editDocs: Deny,
			&test: Deny, &other: Deny, &mcp: Deny, &web: Deny}},
		{ModeDontAsk, want{&read: Allow, &readOut: Deny, &readAsk: Deny, &edit: Deny, &editDocs: Allow,
			&test: Allow, &other: Deny, &rm: Deny, &mcp: Deny}},
		{ModeBypassPermissions, want{&read: Allow, &readOut: Allow, &readAsk: Ask, &env: Deny, &edit: Allow,
			&editOut: Allow, &editGit: Ask, &editAgents: Allow, &other: Allow, &rm: Deny, &mcp: Allow, &web: Allow}},
	} {
		for c, w := range tc.want {
			d := Effective(tc.mode, set, *c)
			if d.Outcome != w {
				t.Errorf("%s: %s %s = %v (%s %s), want %v", tc.mode, c.Tool, c.Input, d.Outcome, d.Rule, d.Reason, w)
			}
		}
	}
}

func TestEffectiveNeverDefault(t *testing.T) {
	t.Parallel()
	for _, m := range append(modes, "", "auto") {
		d := Effective(m, Set{}, call("bash", cmd("ls")))
		if d.Outcome == Default {
			t.Errorf("mode %q left the call undecided", m)
		}
	}
	// An unknown mode set in code is read as plan, the narrowest.
	if d := Effective("auto", Set{}, call("bash", cmd("ls"))); d.Outcome != Deny {
		t.Errorf("unknown mode: %v, want deny", d.Outcome)
	}
}
