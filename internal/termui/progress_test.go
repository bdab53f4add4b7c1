package termui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// A run's progress as lines: a subagent's start, its tool call (cut at
// 120 characters) and failed result (its first line), its end; the
// root's successful result says nothing. Plain bytes off a terminal;
// on one, the failure red, the call dim and the end's state green. The
// status line counts the subagents at work.
func TestProgressLines(t *testing.T) {
	t.Parallel()
	long := `{"path":"` + strings.Repeat("a", 200) + `"}`
	kid := func(kind agent.EventKind) agent.Event {
		return agent.Event{Kind: kind, Instance: "i-kid", Type: "helper", Depth: 1}
	}
	call, failed, ended := kid(agent.EventStep), kid(agent.EventStep), kid(agent.EventEnded)
	call.Loop = loop.Event{Kind: loop.EventToolCall, Block: llm.Block{Name: "read_file", Input: json.RawMessage(long)}}
	failed.Loop = loop.Event{Kind: loop.EventToolResult, Block: llm.Block{IsError: true, Text: "no such file\nat /x"}}
	ended.Relay = &agent.Relay{State: instance.Completed, Turns: 2, Report: "done"}
	fine := agent.Event{Kind: agent.EventStep, Instance: "i-root", Loop: loop.Event{Kind: loop.EventToolResult}}
	events := []agent.Event{kid(agent.EventSpawned), call, failed, fine, ended}

	var plain bytes.Buffer
	p := NewProgress(&plain, Style{})
	for i, e := range events {
		p.OnEvent(e)
		if i == 0 && p.status() != "working, 1 subagent at work" {
			t.Errorf("status with a subagent at work: %q", p.status())
		}
	}
	want := "  ↳ helper i-kid: started\n" +
		"    helper i-kid: · read_file " + Clip(long, 120) + "\n" +
		"    helper i-kid:   ! no such file\n" +
		"  ↳ helper i-kid: completed in 2 turns, 4 chars reported\n"
	if plain.String() != want {
		t.Errorf("plain progress:\n%q\nwant\n%q", plain.String(), want)
	}
	if p.status() != "working" {
		t.Errorf("status once the subagent ended: %q", p.status())
	}

	var live bytes.Buffer
	p = NewProgress(&live, Style{Live: true})
	for _, e := range events {
		p.OnEvent(e)
	}
	for _, part := range []string{sgrDim + "· read_file", sgrRed + "  ! no such file" + sgrReset,
		sgrGreen + "completed" + sgrReset} {
		if !strings.Contains(live.String(), part) {
			t.Errorf("live progress has no %q:\n%q", part, live.String())
		}
	}
}

// StyleFor is plain when told off and for anything not a terminal.
func TestStyleForIsPlainOffATerminal(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if s := StyleFor(&b, false); s.Live || s.paint(sgrRed, "x") != "x" {
		t.Errorf("a buffer's style is %+v", s)
	}
	if s := StyleFor(nil, true); s.Live {
		t.Errorf("off gave %+v", s)
	}
	if got := (Style{Live: true}).paint(sgrBold, "x"); got != fmt.Sprint(sgrBold, "x", sgrReset) {
		t.Errorf("live paint %q", got)
	}
}
