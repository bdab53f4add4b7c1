package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/termui"
)

// noColorFlag turns colour and the spinner off, as $NO_COLOR does.
const noColorFlag = "no-color"

// styleFor is the style of w for cmd: plain when the user said so
// (--no-color, $NO_COLOR, https://no-color.org) or TERM=dumb says the
// terminal understands no escapes.
func styleFor(cmd *cobra.Command, w io.Writer) termui.Style {
	off, _ := cmd.Flags().GetBool(noColorFlag)
	return termui.StyleFor(w, off || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb")
}
