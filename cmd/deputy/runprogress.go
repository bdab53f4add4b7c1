package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
)

// runProgress writes a run's progress lines to w: one per tool call and
// per subagent start and end. On a terminal (style live) they are
// coloured and a status line under them says how long the run has taken
// and how many subagents are at work (startLive); elsewhere they are
// plain text. Children run concurrently: lines are written whole, under a
// lock.
type runProgress struct {
	w     io.Writer
	style style
	mu    sync.Mutex
	live  *liveLine // while the status line shows
	kids  atomic.Int64
}

// start shows the status line, on a terminal only.
func (p *runProgress) start(clk clock.Clock) {
	if !p.style.live {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = startLive(p.w, clk, p.status)
}

// stop clears the status line before what follows the run is printed.
func (p *runProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live != nil {
		p.live.Stop()
		p.live = nil
	}
}

func (p *runProgress) status() string {
	switch n := p.kids.Load(); {
	case n == 1:
		return "working, 1 subagent at work"
	case n > 1:
		return fmt.Sprintf("working, %d subagents at work", n)
	}
	return "working"
}

func (p *runProgress) say(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live != nil {
		p.live.Println(line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// onEvent is the runtime's event hook.
func (p *runProgress) onEvent(e agent.Event) {
	if line := p.line(e); line != "" {
		p.say(line)
	}
}

// line is the progress line of e, "" for none.
func (p *runProgress) line(e agent.Event) string {
	indent := strings.Repeat("  ", e.Depth)
	who := ""
	if e.Depth > 0 {
		who = e.Type + " " + e.Instance + ": "
	}
	switch e.Kind {
	case agent.EventSpawned:
		if e.Depth > 0 {
			p.kids.Add(1)
			return fmt.Sprintf("%s↳ %sstarted", indent, who)
		}
	case agent.EventQueued:
		return fmt.Sprintf("%s↳ %swaiting for %s", indent, who, e.Waiting)
	case agent.EventEnded:
		if e.Depth > 0 {
			p.kids.Add(-1)
		}
		switch r := e.Relay; {
		case r != nil && r.Interrupted:
			// Stopped with this process: nothing ended, and its turns
			// so far are kept for the run that resumes it.
			return fmt.Sprintf("%s↳ %sinterrupted, resumable (saved as of its last finished step)", indent, who)
		case r != nil:
			return fmt.Sprintf("%s↳ %s%s in %d turns, %d chars reported", indent, who, p.style.state(r.State),
				r.Turns, len([]rune(r.Report)))
		}
	case agent.EventStep:
		line := loopLine(e.Loop)
		if line == "" {
			return ""
		}
		if strings.HasPrefix(line, "  !") {
			line = p.style.paint(sgrRed, line)
		} else {
			line = p.style.paint(sgrDim, line)
		}
		line = indent + strings.ReplaceAll(line, "\n", "\n"+indent)
		if who != "" {
			line = indent + "  " + who + strings.TrimPrefix(line, indent)
		}
		return line
	}
	return ""
}

// state is an end's state in its colour: green completed, red failed or
// timed out, bold otherwise.
func (s style) state(st instance.State) string {
	switch st {
	case instance.Completed:
		return s.paint(sgrGreen, string(st))
	case instance.Failed, instance.TimedOut:
		return s.paint(sgrRed, string(st))
	}
	return s.paint(sgrBold, string(st))
}

// lineWriter writes whole lines through a run's progress (above its
// status line on a terminal): for messages printed with fmt.Fprintf.
type lineWriter struct{ p *runProgress }

func (w lineWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		w.p.say(line)
	}
	return len(b), nil
}
