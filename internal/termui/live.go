package termui

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// liveLine is a status line kept at the foot of a terminal while a command
// works: a spinner, what is going on and the time elapsed, redrawn every
// liveEvery. Lines written through Println scroll above it. Only for a
// terminal (Style.Live): a pipe gets the lines alone.
type liveLine struct {
	mu     sync.Mutex
	w      io.Writer
	clock  clock.Clock
	start  time.Time
	status func() string // what is going on, read at each redraw
	frame  int
	timer  clock.Timer
	done   bool
}

// liveEvery is the redraw interval: fast enough to look alive, slow
// enough to cost nothing.
const liveEvery = 100 * time.Millisecond

// spinnerFrames are the spinner's faces (braille dots, as most terminal
// spinners use).
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// eraseLine returns the cursor to the line's start and clears the line.
const eraseLine = "\r\x1b[K"

// startLive draws the status line on w and keeps redrawing it on clk.
func startLive(w io.Writer, clk clock.Clock, status func() string) *liveLine {
	l := &liveLine{w: w, clock: clk, start: clk.Now(), status: status}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draw()
	l.timer = clk.AfterFunc(liveEvery, l.tick)
	return l
}

func (l *liveLine) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.frame++
	l.draw()
	l.timer = l.clock.AfterFunc(liveEvery, l.tick)
}

// draw writes the status line over the current one; l.mu is held.
func (l *liveLine) draw() {
	elapsed := l.clock.Now().Sub(l.start).Truncate(100 * time.Millisecond)
	fmt.Fprintf(l.w, "%s%s%s%s %s %s%s%s", eraseLine, sgrCyan, spinnerFrames[l.frame%len(spinnerFrames)], sgrReset,
		l.status(), sgrDim, fmtElapsed(elapsed), sgrReset)
}

// Println writes line above the status line.
func (l *liveLine) Println(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		fmt.Fprintln(l.w, line)
		return
	}
	fmt.Fprint(l.w, eraseLine)
	fmt.Fprintln(l.w, line)
	l.draw()
}

// Stop clears the status line for good; later lines are written plainly.
func (l *liveLine) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	l.timer.Stop()
	fmt.Fprint(l.w, eraseLine)
}

// fmtElapsed is a duration as people read a stopwatch: 4.2s, 1m05s.
func fmtElapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
