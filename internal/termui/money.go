package termui

import (
	"fmt"
	"io"

	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/instance"
)

// USD is a cost in US dollars as the tables print it, rounded for people:
// cents from a dollar up ($1.23), four decimals below it ($0.0123), and
// <$0.0001 for a cost too small for those to show. --json keeps the exact
// value.
func USD(c float64) string {
	switch {
	case c == 0:
		return "$0"
	case c < 0.0001:
		return "<$0.0001"
	case c < 1:
		return fmt.Sprintf("$%.4f", c)
	}
	return fmt.Sprintf("$%.2f", c)
}

// CostCell is an instance's or a total's cost in a table: "unpriced" for
// a model with no known price (UnpricedHints says how to price it).
func CostCell(c *float64) string {
	if c == nil {
		return "unpriced"
	}
	return USD(*c)
}

// UnpricedHints says, under a cost table, for each model of rows with no
// known price (once each), the deputy.yaml line that prices it.
func UnpricedHints(w io.Writer, rows []instance.Record) {
	var seen cost.Unpriced
	first := true
	for _, in := range rows {
		if in.Cost != nil || in.Model == "" || !seen.First(in.Model) {
			continue
		}
		if first {
			fmt.Fprintln(w, "unpriced: deputy knows no price for these models; to count their cost, add under prices: in deputy.yaml")
			first = false
		}
		fmt.Fprintf(w, "  %s\n", cost.Hint(in.Model))
	}
}
