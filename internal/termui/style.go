// Package termui is what deputy's CLI writes for people to read: the
// styling of a stream (colour only on a terminal, and not when the user
// said no), the status line kept at a terminal's foot, a run's progress
// lines, and costs as its tables print them. It reads no flags and no
// environment: the command says whether colour is off (StyleFor).
package termui

import (
	"io"
	"os"
)

// ANSI SGR sequences: the few the CLI dresses its lines with.
const (
	sgrReset = "\x1b[0m"
	sgrBold  = "\x1b[1m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrCyan  = "\x1b[36m"
)

// Style is how a command may dress what it writes to one stream: colour
// and a live status line on a terminal; plain bytes on a pipe or a file,
// or when the user said no.
type Style struct{ Live bool }

// StyleFor is the style of w: live when w is a terminal and off is false.
// The command sets off for --no-color, $NO_COLOR (https://no-color.org)
// and TERM=dumb (a terminal that understands no escapes).
func StyleFor(w io.Writer, off bool) Style {
	if off {
		return Style{}
	}
	f, ok := w.(*os.File)
	return Style{Live: ok && isTerminal(f)}
}

// paint wraps s in the SGR sequence sgr when the style is live.
func (s Style) paint(sgr, text string) string {
	if !s.Live || text == "" {
		return text
	}
	return sgr + text + sgrReset
}
