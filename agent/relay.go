package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

// maxRelayArtifacts bounds the artifact list in a tool result: a child that
// edited hundreds of files must not flood the parent's context with paths
// (the full list stays in the Relay and the instance's record).
const maxRelayArtifacts = 20

// Relay is what a parent receives when a child ends: the bounded report and
// the facts about the run. The report is the only large field, and it is
// already capped (CapReport) by the time a Relay exists.
type Relay struct {
	ID   string // instance id: the pointer to the full transcript
	Type string // the definition's name
	// State is the instance's terminal state, or asking or paused for a
	// child that stopped to wait. A relay in state failed (or with Error
	// set) reaches the parent model as a tool error.
	State instance.State
	// Report is the child's final text, capped, or NoReport's marker.
	Report string
	// Incomplete marks a partial result: the hard timeout, a budget or
	// the turn limit stopped the child before it finished.
	Incomplete bool
	StopReason string
	Artifacts  []string // files the child wrote or edited
	// Usage is the child's and its own children's: what delegating the
	// task cost in all. Cost is the same in USD, nil when unpriced.
	Usage     llm.Usage
	Cost      *float64
	ToolCalls int
	Turns     int
	Duration  time.Duration
	Error     string // why the child failed; empty when it did not
	// Question is the child's open question when State is asking: it
	// has not ended, it waits for the answer (subagent_answer).
	Question string
	// Interrupted marks the relay of an EventEnded for a child stopped with
	// its engine (a durable engine's shutdown): it has not ended, State is
	// what its record holds (created or running), and the next execution
	// resumes it. No parent ever reads such a relay.
	Interrupted bool
}

// RelayOf is the relay of a recorded instance, everything taken from its
// record: its end, or, while it waits, its state (and Question). Usage and
// Cost are the instance's own, since a record does not hold what its
// children spent. A record the store could not read whole (Problems) says
// so in the report, so a parent never takes a gap for "nothing": a lost
// artifact list is not "no files written".
func RelayOf(rec *instance.Record) Relay {
	r := Relay{ID: rec.ID, Type: rec.Type, State: rec.State, Report: rec.Report, Incomplete: rec.Incomplete,
		StopReason: rec.StopReason, Artifacts: slices.Clone(rec.Artifacts), Usage: rec.Usage, Cost: rec.Cost,
		ToolCalls: rec.ToolCalls, Turns: rec.Turns, Duration: rec.Duration(), Error: rec.Error, Question: rec.Question}
	for _, p := range rec.Problems {
		r.Report += "\n\n[deputy] This subagent's record is damaged: " + p + ". Its transcript shows what it did."
	}
	return r
}

// CapReport bounds a report to limit characters (runes, so the cut never splits
// a UTF-8 sequence), keeping the head, where reports put their conclusion.
// A cut report ends with a marker saying how many characters were cut and
// where the rest is; cut reports whether that happened. limit <= 0 means
// no limit. Invalid UTF-8 is replaced so the result is always valid.
//
// The caller first asks the child for a summary within the cap; this is the
// fallback when the summary is still too long.
func CapReport(report string, limit int) (out string, cut bool) {
	report = strings.ToValidUTF8(report, "\uFFFD")
	if limit <= 0 {
		return report, false
	}
	n := 0
	for i := range report {
		if n == limit {
			rest := utf8.RuneCountInString(report[i:])
			return report[:i] + cutMarker(rest), true
		}
		n++
	}
	return report, false
}

// cutMarker is appended to a cut report. It names the instance id rather
// than repeating it because the tool result around the report carries it.
func cutMarker(n int) string {
	return fmt.Sprintf("\n[report cut: %d more characters; the full transcript is available by this subagent's instance id]", n)
}

// NoReport is the report of a child that ended without final text, naming
// the stop reason, so the parent never sees an empty result and can tell
// "nothing found" from "never answered".
func NoReport(stop string) string {
	if stop == "" {
		stop = "unknown"
	}
	return "[no report: the subagent ended without a final answer (stop reason: " + stop + ")]"
}

// Failed reports whether the child failed: State is failed or Error is set
// (either alone is enough, so a caller that forgets one still gets an
// error result).
func (r Relay) Failed() bool { return r.State == instance.Failed || r.Error != "" }

// ToolResult renders the relay as the spawn tool's result for the parent
// model, and whether it is an error result (the child failed).
//
// It is compact text rather than JSON: the parent reads it as prose, text
// costs fewer tokens than quoted keys and escaped newlines in the report,
// and the report's own formatting (lists, code) survives unescaped. The
// shape is a header of short "key: value" lines, a blank line, then the
// report:
//
//	subagent exp-1 (explorer): completed, stop end_turn
//	usage: 3 turns, 7 tool calls, 41200 tokens in (38000 cached), 900 out, 12.4s
//	artifacts: a.go, b.go
//
//	<report>
//
// A failed child adds an "error:" line and is an error result; its report
// (partial work, or the no-report marker) follows as usual, so the result
// is never empty.
func (r Relay) ToolResult() (string, bool) {
	var b strings.Builder
	b.Grow(len(r.Report) + 256)

	id := r.ID
	if id == "" {
		id = "?"
	}
	state := string(r.State)
	if state == "" {
		state = "ended"
	}
	b.WriteString("subagent ")
	b.WriteString(id)
	if r.Type != "" {
		b.WriteString(" (" + r.Type + ")")
	}
	b.WriteString(": " + state)
	if r.Incomplete {
		b.WriteString(", incomplete")
	}
	if r.StopReason != "" && r.StopReason != state && r.StopReason != "completed" {
		b.WriteString(", stop " + r.StopReason)
	}

	b.WriteString("\nusage: ")
	b.WriteString(strconv.Itoa(r.Turns) + " turns, ")
	b.WriteString(strconv.Itoa(r.ToolCalls) + " tool calls, ")
	b.WriteString(strconv.FormatInt(r.Usage.Prompt(), 10) + " tokens in")
	if r.Usage.CacheReadTokens > 0 {
		b.WriteString(" (" + strconv.FormatInt(r.Usage.CacheReadTokens, 10) + " cached)")
	}
	b.WriteString(", " + strconv.FormatInt(r.Usage.OutputTokens, 10) + " out, ")
	if r.Cost != nil {
		b.WriteString("$" + strconv.FormatFloat(*r.Cost, 'f', 4, 64) + ", ")
	}
	b.WriteString(r.Duration.Round(100 * time.Millisecond).String())

	if r.Failed() {
		msg := r.Error
		if msg == "" {
			msg = "the subagent failed without an error message"
		}
		b.WriteString("\nerror: " + msg)
	}

	switch r.State {
	case instance.Asking:
		b.WriteString("\nquestion: " + r.Question)
		b.WriteString("\n\nIt waits for your answer: call subagent_answer with its id and the answer, then " +
			"subagent_wait for its report.")
		return b.String(), false
	case instance.Paused:
		b.WriteString("\n\nIt was paused before it ended: subagent_resume resumes it, subagent_wait then " +
			"collects its report.")
		return b.String(), false
	}

	if len(r.Artifacts) > 0 {
		shown := r.Artifacts[:min(len(r.Artifacts), maxRelayArtifacts)]
		b.WriteString("\nartifacts: " + strings.Join(shown, ", "))
		if more := len(r.Artifacts) - len(shown); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}

	report := r.Report
	if strings.TrimSpace(report) == "" {
		report = NoReport(r.StopReason)
	}
	b.WriteString("\n\n")
	b.WriteString(report)
	return b.String(), r.Failed()
}
