package termui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/loop"
)

// Progress writes a run's progress lines to w: one per tool call and
// per subagent start and end. On a terminal (Style.Live) they are
// coloured and a status line under them says how long the run has taken
// and how many subagents are at work (startLive); elsewhere they are
// plain text. Children run concurrently: lines are written whole, under a
// lock.
type Progress struct {
	w     io.Writer
	style Style
	mu    sync.Mutex
	live  *liveLine // while the status line shows
	kids  atomic.Int64
}

// NewProgress writes a run's progress to w in style s.
func NewProgress(w io.Writer, s Style) *Progress { return &Progress{w: w, style: s} }

// Start shows the status line, on a terminal only.
func (p *Progress) Start(clk clock.Clock) {
	if !p.style.Live {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = startLive(p.w, clk, p.status)
}

// Stop clears the status line before what follows the run is printed.
func (p *Progress) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live != nil {
		p.live.Stop()
		p.live = nil
	}
}

func (p *Progress) status() string {
	switch n := p.kids.Load(); {
	case n == 1:
		return "working, 1 subagent at work"
	case n > 1:
		return fmt.Sprintf("working, %d subagents at work", n)
	}
	return "working"
}

func (p *Progress) say(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live != nil {
		p.live.Println(line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// OnEvent is the runtime's event hook.
func (p *Progress) OnEvent(e agent.Event) {
	if line := p.line(e); line != "" {
		p.say(line)
	}
}

// line is the progress line of e, "" for none.
func (p *Progress) line(e agent.Event) string {
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
func (s Style) state(st instance.State) string {
	switch st {
	case instance.Completed:
		return s.paint(sgrGreen, string(st))
	case instance.Failed, instance.TimedOut:
		return s.paint(sgrRed, string(st))
	}
	return s.paint(sgrBold, string(st))
}

// Writer writes whole lines through the run's progress (above its status
// line on a terminal): for messages printed with fmt.Fprintf.
func (p *Progress) Writer() io.Writer { return lineWriter{p} }

type lineWriter struct{ p *Progress }

func (w lineWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		w.p.say(line)
	}
	return len(b), nil
}

// loopLine is the progress line of one loop event, or "".
func loopLine(e loop.Event) string {
	switch e.Kind {
	case loop.EventToolCall:
		return fmt.Sprintf("· %s %s", e.Block.Name, Clip(e.Block.Arguments(), 120))
	case loop.EventToolResult:
		if e.Block.IsError {
			return fmt.Sprintf("  ! %s", Clip(firstLine(e.Block.Text), 160))
		}
	case loop.EventModelAttempt:
		if a := e.Attempt; a.Retry {
			return fmt.Sprintf("· %s attempt %d failed (%s), retrying in %s", a.Provider, a.N, a.Reason, a.Wait.Round(time.Millisecond))
		}
	case loop.EventCompaction:
		return fmt.Sprintf("· compacted %d messages", e.Compacted)
	case loop.EventWrapUp:
		return "· time is almost up: asked to wrap up"
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Clip is s cut to n characters, an ellipsis marking the cut.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
