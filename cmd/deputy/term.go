package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// noColorFlag turns colour and the spinner off, as $NO_COLOR does.
const noColorFlag = "no-color"

// ANSI SGR sequences: the few the CLI dresses its lines with.
const (
	sgrReset = "\x1b[0m"
	sgrBold  = "\x1b[1m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrCyan  = "\x1b[36m"
)

// style is how a command may dress what it writes to one stream: colour
// and a live status line on a terminal; plain bytes on a pipe or a file,
// or when the user said no ($NO_COLOR, https://no-color.org, --no-color,
// or TERM=dumb, a terminal that understands no escapes).
type style struct{ live bool }

// styleFor is the style of w for cmd.
func styleFor(cmd *cobra.Command, w io.Writer) style {
	if off, _ := cmd.Flags().GetBool(noColorFlag); off || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return style{}
	}
	f, ok := w.(*os.File)
	return style{live: ok && isTerminal(f)}
}

// paint wraps s in the SGR sequence sgr when the style is live.
func (s style) paint(sgr, text string) string {
	if !s.live || text == "" {
		return text
	}
	return sgr + text + sgrReset
}
